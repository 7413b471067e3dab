// A sharded checkpoint's manifest (runtime/checkpoint/files/shard_manifest.h): what parse_manifest
// refuses, with a valid checksum, so that only its own checks stand between a crafted manifest
// and the loaders; and a shard of the wrong size, refused alike by every reader.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "runtime/checkpoint/files/crc32.h"
#include "runtime/checkpoint/files/shard_manifest.h"
#include "runtime/checkpoint/files/shard_reader.h"

namespace {

// A parameter "w" of 12 elements held whole by the one shard of a world of 1, and one of `shape`
// that no shard holds a piece of.
zl::Manifest manifest_of(std::vector<std::int64_t> shape) {
  zl::Manifest m;
  m.world_size = 1;
  m.parameters.push_back({"w", {4, 3}});
  m.parameters.push_back({"evil", std::move(shape)});
  m.state_names = {"exp_avg"};
  m.shards.push_back({zl::shard_file_name(0, 1, 0), 0, 64, 0, {{"w", 0, 12}}});
  return m;
}

}  // namespace

TEST_CASE("a manifest round-trips and its shape is bounded", "[sharded-manifest]") {
  const zl::Manifest good = zl::parse_manifest(zl::manifest_to_json(manifest_of({0})), "m.json");
  CHECK(good.parameters.at(0).numel() == 12);
  // 2^32 x 2^32 elements wrapped to 0 (signed overflow): no piece was missing, and `consolidate`
  // failed an internal check (exit 1); each dimension alone is within the per-dimension bound.
  const std::int64_t big = std::int64_t{1} << 32;
  CHECK_THROWS_WITH(zl::parse_manifest(zl::manifest_to_json(manifest_of({big, big})), "m.json"),
                    Catch::Matchers::Contains("m.json") &&
                        Catch::Matchers::Contains("'evil' has a bad shape"));
  CHECK_THROWS_AS(zl::parse_manifest(zl::manifest_to_json(manifest_of({-1, 4})), "m.json"),
                  zl::UserError);
}

TEST_CASE("a manifest's JSON keys are the documented format", "[sharded-manifest]") {
  // docs/checkpoints.md, "The manifest": the key names are the file format (checkpoints written
  // by earlier builds must load), whatever the C++ members are called.
  const auto file = nlohmann::json::parse(zl::manifest_to_json(manifest_of({2})));
  const nlohmann::json& m = file.at("manifest");
  const char* parameters = R"([{"name": "w", "shape": [4, 3]}, {"name": "evil", "shape": [2]}])";
  CHECK(m.at("parameters") == nlohmann::json::parse(parameters));
  CHECK(m.at("shards").at(0).at("pieces") ==
        nlohmann::json::parse(R"([{"name": "w", "begin": 0, "numel": 12}])"));
  CHECK(m.at("optimizer_state") == nlohmann::json::parse(R"(["exp_avg"])"));
}

TEST_CASE("a shard of another size than its manifest says is refused alike by every reader",
          "[sharded-manifest]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(ZEROLAP_TEST_TMP) / "shard-size";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const zl::Manifest m = manifest_of({2});  // its one shard has 64 bytes
  std::ofstream(dir / m.shards.at(0).file) << "ten bytes.";
  const std::string manifest = (dir / "manifest.json").string();
  const std::string message =
      "checkpoint shard '" + (dir / m.shards[0].file).string() + "' has 10 bytes, its manifest '" +
      manifest + "' says 64: the file is truncated or belongs to another checkpoint";
  // The check before a load or `zerolap inspect`, and a shard opened for reading.
  CHECK_THROWS_WITH(zl::verify_shard(manifest, m.shards[0]), message);
  zl::ShardSet shards(m, manifest);
  CHECK_THROWS_WITH(shards.open(0), message);
}

namespace {

// The manifest text of `body` under its own CRC32: a hand edit that is self-consistent, so that
// only parse_manifest's checks of the content can refuse it.
std::string signed_manifest(const nlohmann::json& body) {
  const std::string text = body.dump();
  return nlohmann::json{{"crc32", zl::crc_hex(zl::crc32_update(0, text.data(), text.size()))},
                        {"manifest", body}}
      .dump();
}

// A world of 2: shard 0 holds "w" [0, 6), shard 1 holds [6, 12).
nlohmann::json two_shard_body() {
  zl::Manifest m = manifest_of({0});
  m.world_size = 2;
  m.shards.at(0).pieces = {{"w", 0, 6}};
  m.shards.push_back({zl::shard_file_name(1, 2, 0), 1, 64, 0, {{"w", 6, 6}}});
  return nlohmann::json::parse(zl::manifest_to_json(m)).at("manifest");
}

}  // namespace

TEST_CASE("a manifest's numbers are integers: a fraction or a wrapped value is refused",
          "[sharded-manifest]") {
  const nlohmann::json good = two_shard_body();
  CHECK_NOTHROW(zl::parse_manifest(signed_manifest(good), "m.json"));
  // A fraction or a number past int64 is refused, not truncated or wrapped into another piece.
  for (const nlohmann::json& begin : {nlohmann::json(6.5), nlohmann::json(6.0),
                                      nlohmann::json(std::uint64_t{18446744073709551608u})}) {
    nlohmann::json body = good;
    body["shards"][1]["pieces"][0]["begin"] = begin;
    CHECK_THROWS_WITH(zl::parse_manifest(signed_manifest(body), "m.json"),
                      Catch::Matchers::Contains("m.json") &&
                          Catch::Matchers::Contains("shards[1].pieces[0].begin = " +
                                                    begin.dump() + " is not an integer"));
  }
  nlohmann::json body = good;
  body["world_size"] = (std::int64_t{1} << 32) + 2;  // not read as an int's 2
  CHECK_THROWS_AS(zl::parse_manifest(signed_manifest(body), "m.json"), zl::UserError);
}

TEST_CASE("a manifest's CRCs are read in the spelling written, as a safetensors file's",
          "[sharded-manifest]") {
  nlohmann::json body = two_shard_body();
  body["shards"][1]["crc32"] = "89abcdef";
  CHECK(zl::parse_manifest(signed_manifest(body), "m.json").shards.at(1).crc32 == 0x89abcdefu);
  body["shards"][1]["crc32"] = "89ABCDEF";  // the safetensors reader refused this; this one took it
  CHECK_THROWS_WITH(zl::parse_manifest(signed_manifest(body), "m.json"),
                    Catch::Matchers::Contains("m.json") &&
                        Catch::Matchers::Contains("'89ABCDEF' is not 8 lower-case hex digits"));
}

TEST_CASE("two shards of a manifest naming one file are refused", "[sharded-manifest]") {
  nlohmann::json body = two_shard_body();
  body["shards"][1]["file"] = body["shards"][0]["file"];
  CHECK_THROWS_WITH(zl::parse_manifest(signed_manifest(body), "m.json"),
                    Catch::Matchers::Contains("m.json") &&
                        Catch::Matchers::Contains("shards 0 and 1 both name '" +
                                                  zl::shard_file_name(0, 1, 0) + "'"));
}

TEST_CASE("a shard that is a directory is named as such, not as missing", "[sharded-manifest]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(ZEROLAP_TEST_TMP) / "shard-dir";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const zl::Manifest m = manifest_of({2});
  fs::create_directories(dir / m.shards.at(0).file);
  const std::string manifest = (dir / "manifest.json").string();
  CHECK_THROWS_WITH(zl::verify_shard(manifest, m.shards[0]),
                    Catch::Matchers::Contains("is a directory, not a regular file") &&
                        !Catch::Matchers::Contains("missing"));
}
