// The safetensors writer and reader (runtime/checkpoint/files/safetensors.h): a bitwise round trip,
// a zerolap file parsed by an independent minimal reader written here, and every way a file can be
// bad (corrupt data, truncation, bad header, overlaps, wrong dtype/shape, missing tensor) ->
// UserError naming the file and the tensor.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "tests/runtime/error_message_checks.h"

using Catch::Contains;
using zl::SafetensorsReader;
using zl::SafetensorsWriter;
using zl::TensorSpec;
using zl::UserError;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::path(ZEROLAP_TEST_TMP) / fmt::format("safetensors-{}", ::getpid());
  fs::create_directories(dir);
  return (dir / name).string();
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A file with "a" [2, 3], "b" [5] and "c" [4, 1], written in pieces that cross tensor boundaries.
struct Sample {
  std::string path;
  std::vector<float> a = random_floats(6, 1), b = random_floats(5, 2), c = random_floats(4, 3);
};

Sample write_sample(const std::string& name) {
  Sample s;
  s.path = temp_path(name);
  SafetensorsWriter w(s.path, {{"a", "F32", {2, 3}}, {"b", "F32", {5}}, {"c", "F32", {4, 1}}},
                      {{"step", "7"}, {"note", "hello \"world\""}});
  std::vector<float> all = s.a;
  all.insert(all.end(), s.b.begin(), s.b.end());
  all.insert(all.end(), s.c.begin(), s.c.end());
  w.write_floats(all.data(), 4);          // part of a
  w.write_floats(all.data() + 4, 5);      // end of a, most of b
  CHECK(w.next_tensor() == "b");
  w.write_floats(all.data() + 9, 6);      // end of b, all of c
  CHECK(w.next_tensor().empty());
  w.finish();
  return s;
}

std::vector<float> read(const SafetensorsReader& r, const std::string& name,
                        const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> out(static_cast<std::size_t>(n));
  r.read_f32(name, shape, out.data());
  return out;
}

bool bitwise_equal(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Data-section offset of tensor `name` in a file, by the independent reader's parsing.
std::uint64_t data_start(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  return 8 + n;
}

}  // namespace

TEST_CASE("safetensors round trip is bitwise and keeps metadata", "[checkpoint][safetensors]") {
  const Sample s = write_sample("roundtrip.safetensors");
  const SafetensorsReader r(s.path);
  REQUIRE(r.tensors().size() == 3);
  CHECK(r.tensors()[0].name == "a");  // data order = write order
  CHECK(r.tensors()[2].name == "c");
  CHECK(bitwise_equal(read(r, "a", {2, 3}), s.a));
  CHECK(bitwise_equal(read(r, "b", {5}), s.b));
  CHECK(bitwise_equal(read(r, "c", {4, 1}), s.c));
  CHECK(r.metadata().at("step") == "7");
  CHECK(r.metadata().at("note") == "hello \"world\"");
  CHECK(r.has_checksums());
  CHECK_NOTHROW(r.verify_checksums());
  CHECK((8 + r.header_bytes()) % 8 == 0);  // the data section starts 8-byte aligned
  CHECK(r.data_bytes() == 15 * sizeof(float));
}

TEST_CASE("an independent minimal safetensors reader parses a zerolap file",
          "[checkpoint][safetensors]") {
  const Sample s = write_sample("independent.safetensors");
  // The format from its specification only: u64 LE length, JSON, raw little-endian data.
  const std::string bytes = read_bytes(s.path);
  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  REQUIRE(8 + n <= bytes.size());
  const std::string header_text = bytes.substr(8, n);
  CHECK(header_text.front() == '{');
  const auto header = nlohmann::json::parse(header_text);
  const std::string data = bytes.substr(8 + n);

  const std::map<std::string, std::pair<std::vector<std::int64_t>, const std::vector<float>*>>
      expected = {{"a", {{2, 3}, &s.a}}, {"b", {{5}, &s.b}}, {"c", {{4, 1}, &s.c}}};
  std::uint64_t covered = 0;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : entry.items()) CHECK(v.is_string());  // the spec: str -> str
      continue;
    }
    INFO("tensor " << name);
    REQUIRE(expected.count(name) == 1);
    CHECK(entry.at("dtype") == "F32");
    CHECK(entry.at("shape").get<std::vector<std::int64_t>>() == expected.at(name).first);
    const auto begin = entry.at("data_offsets")[0].get<std::uint64_t>();
    const auto end = entry.at("data_offsets")[1].get<std::uint64_t>();
    const auto& values = *expected.at(name).second;
    REQUIRE(end - begin == values.size() * 4);
    REQUIRE(end <= data.size());
    std::vector<float> got(values.size());
    std::memcpy(got.data(), data.data() + begin, end - begin);
    CHECK(bitwise_equal(got, values));
    covered += end - begin;
  }
  CHECK(covered == data.size());
  CHECK(header.at("__metadata__").at("step") == "7");
}

TEST_CASE("a flipped data byte is a CRC error naming the file and the tensor",
          "[checkpoint][safetensors]") {
  const Sample s = write_sample("corrupt.safetensors");
  std::string bytes = read_bytes(s.path);
  bytes[data_start(bytes) + 6 * 4 + 2] ^= 0x10;  // inside "b"
  write_bytes(s.path, bytes);
  const SafetensorsReader r(s.path);  // the structure is intact
  CHECK_THROWS_WITH(r.verify_checksums(), Contains(s.path) && Contains("tensor 'b'") &&
                                              Contains("CRC32"));
}

TEST_CASE("truncated files are errors naming the file and the tensor", "[checkpoint][safetensors]") {
  const Sample s = write_sample("truncated.safetensors");
  const std::string bytes = read_bytes(s.path);
  write_bytes(s.path, bytes.substr(0, bytes.size() - 3));
  CHECK_THROWS_AS(SafetensorsReader(s.path), UserError);
  CHECK_THROWS_WITH(SafetensorsReader(s.path),
                    Contains(s.path) && Contains("truncated") && Contains("tensor 'c'"));
  write_bytes(s.path, bytes.substr(0, 5));
  CHECK_THROWS_WITH(SafetensorsReader(s.path), Contains(s.path) && Contains("truncated"));
  write_bytes(s.path, bytes.substr(0, 40));  // inside the header
  CHECK_THROWS_WITH(SafetensorsReader(s.path), Contains(s.path) && Contains("header length"));
  write_bytes(s.path, bytes + "junk");
  CHECK_THROWS_WITH(SafetensorsReader(s.path), Contains(s.path) && Contains("after the last tensor"));
}

TEST_CASE("malformed headers are errors", "[checkpoint][safetensors]") {
  const std::string path = temp_path("bad_header.safetensors");
  auto with_header = [&](std::string json, std::size_t data_bytes) {
    std::string bytes(8, '\0');
    const std::uint64_t n = json.size();
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(n >> (8 * i));
    write_bytes(path, bytes + json + std::string(data_bytes, '\0'));
  };
  with_header("{\"a\": {\"dtype\": \"F32\", ", 0);
  CHECK_THROWS_WITH(SafetensorsReader(path), Contains(path) && Contains("not valid JSON"));
  with_header(R"({"a": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}})", 4);
  CHECK_THROWS_WITH(SafetensorsReader(path), Contains("tensor 'a'") && Contains("unknown dtype"));
  with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 4);
  CHECK_THROWS_WITH(SafetensorsReader(path), Contains("tensor 'a'") && Contains("data_offsets"));
  with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8);
  CHECK_THROWS_WITH(SafetensorsReader(path), Contains("'a' and 'b' overlap"));
  with_header(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4);
  CHECK_THROWS_WITH(SafetensorsReader(path), Contains("tensor 'a'") && Contains("shape"));
  with_header(R"({"__metadata__": {"step": 3}})", 0);
  CHECK_THROWS_WITH(SafetensorsReader(path), Contains("metadata 'step' is not a string"));
  with_header(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4);
  CHECK_NOTHROW(SafetensorsReader(path));  // a foreign file without checksums is fine
  CHECK_FALSE(SafetensorsReader(path).has_checksums());
}

TEST_CASE("wrong dtype, wrong shape and missing tensors name the file and the tensor",
          "[checkpoint][safetensors]") {
  const std::string path = temp_path("dtype.safetensors");
  {
    SafetensorsWriter w(path, {{"w", "F64", {2}}, {"v", "F32", {3}}}, {});
    const double d[2] = {1.0, 2.0};
    const float f[3] = {1, 2, 3};
    w.write(d, sizeof d);
    w.write_floats(f, 3);
    w.finish();
  }
  const SafetensorsReader r(path);
  std::vector<float> out(6);
  CHECK_THROWS_WITH(r.read_f32("w", {2}, out.data()),
                    Contains(path) && Contains("tensor 'w'") && Contains("F64"));
  CHECK_THROWS_WITH(r.read_f32("v", {4}, out.data()),
                    Contains(path) && Contains("tensor 'v'") && Contains("[3]") && Contains("[4]"));
  CHECK_THROWS_WITH(r.read_f32("u", {3}, out.data()), Contains(path) && Contains("'u'"));
  CHECK_NOTHROW(r.read_f32("v", {3}, out.data()));
  CHECK(out[2] == 3.0f);
}

TEST_CASE("an unfinished writer leaves no file behind", "[checkpoint][safetensors]") {
  const std::string path = temp_path("unfinished.safetensors");
  {
    SafetensorsWriter w(path, {{"a", "F32", {4}}}, {});
    const float x[2] = {1, 2};
    w.write_floats(x, 2);
    CHECK_THROWS_AS(w.finish(), zl::InternalError);  // two floats short
  }
  CHECK_FALSE(fs::exists(path));
  CHECK_THROWS_WITH(SafetensorsWriter(temp_path("no/such/dir/x.safetensors"), {}, {}),
                    Contains("no/such/dir") && Contains("check that its directory exists"));
}

TEST_CASE("a header's names and values are echoed only as bounded, escaped excerpts",
          "[checkpoint][safetensors]") {
  // A crafted checkpoint: a 1 MB tensor name with control bytes (an escape sequence, a newline),
  // in every message that names a tensor or a metadata key.
  const std::string path = temp_path("crafted_names.safetensors");
  const std::string name = "\x1b[2J\n" + std::string(1 << 20, 'n') + "\x01";
  const std::string json_name = "\\u001b[2J\\n" + std::string(1 << 20, 'n') + "\\u0001";
  auto with_header = [&](const std::string& json, std::size_t data_bytes) {
    std::string bytes(8, '\0');
    const std::uint64_t n = json.size();
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(n >> (8 * i));
    write_bytes(path, bytes + json + std::string(data_bytes, '\0'));
  };
  const auto tensor = [&](const std::string& dtype, int begin, int end) {
    return "\"" + json_name + "\": {\"dtype\": \"" + dtype + "\", \"shape\": [1], \"data_offsets\": [" +
           std::to_string(begin) + ", " + std::to_string(end) + "]}";
  };
  const std::vector<std::pair<std::string, std::size_t>> headers = {
      {"{" + tensor("Q7", 0, 4) + "}", 4},                                   // unknown dtype
      {"{" + tensor("F32", 0, 4) + "}", 0},                                  // truncated
      {"{" + tensor("F32", 4, 8) + "}", 8},                                  // unused bytes
      {"{" + tensor("F32", 0, 4) + "}", 12},                                 // bytes after it
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, " +
           tensor("F32", 0, 4) + "}", 4},                                     // overlap
      {"{\"__metadata__\": {\"" + json_name + "\": 3}}", 0},                 // metadata key
      {"{\"a\": {\"dtype\": \"" + json_name + "\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4},
  };
  for (const auto& [json, data_bytes] : headers) {
    with_header(json, data_bytes);
    std::string message;
    try {
      SafetensorsReader reader(path);
    } catch (const UserError& e) {
      message = e.what();
    }
    zl::test::check_bounded_escaped(message);
    CHECK(message.find("\\x1b[2J\\x0annnn") != std::string::npos);  // escaped, then cut
  }
}
