// `zerolap inspect FILE` end to end: lists tensors, shapes, dtypes and metadata (exit 0); a corrupt,
// truncated or missing file exits 2 with a message naming the file (and the tensor).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>

#include "tests/runtime/cli/cli_test_util.h"
#include "runtime/checkpoint/files/safetensors.h"

using Catch::Contains;
namespace fs = std::filesystem;
using zl::test::CliResult;
using zl::test::run_zerolap;

namespace {

std::string write_sample(const std::string& name) {
  const fs::path dir = fs::path(ZEROLAP_TEST_TMP) / fmt::format("inspect-{}", ::getpid());
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  zl::SafetensorsWriter w(path, {{"layers.0.weight", "F32", {4, 3}}, {"layers.0.bias", "F32", {4}}},
                          {{"step", "42"}, {"config", "[model]\nwidths = [3, 4]"}});
  const float x[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  w.write_floats(x, 16);
  w.finish();
  return path;
}

}  // namespace

TEST_CASE("zerolap inspect lists tensors, shapes, dtypes and metadata", "[checkpoint][cli]") {
  const std::string path = write_sample("ok.safetensors");
  const CliResult r = run_zerolap("inspect " + path);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("layers.0.weight") && Contains("[4, 3]") && Contains("F32") &&
                           Contains("layers.0.bias") && Contains("[4]") &&
                           Contains("step = 42") && Contains("checksums ok") &&
                           Contains("widths = [3, 4]"));
}

TEST_CASE("zerolap inspect prints a file's names and metadata escaped and bounded",
          "[checkpoint][cli]") {
  // Control bytes in a tensor name, a metadata key or value (the summary line's step and precision
  // too), or the stored config must not reach the terminal (an ESC sequence could rewrite the
  // screen), and a huge name not flood it.
  const fs::path dir = fs::path(ZEROLAP_TEST_TMP) / fmt::format("inspect-{}", ::getpid());
  fs::create_directories(dir);
  const std::string path = (dir / "hostile.safetensors").string();
  const std::string evil = "evil\x1b[2J\x07name";
  const std::string huge(100000, 'n');
  {
    zl::SafetensorsWriter w(path, {{evil, "F32", {2}}, {huge, "F32", {1}}},
                            {{"key\x1b]0;title\x07", "value\x1b[31m"},
                             {"step", "7\x1b[2J"},
                             {"precision", "bf16\x1b]0;title\x07"},
                             {"config", "[model]\n\x1b[2Jwidths = [3, 4]"}});
    const float x[3] = {1, 2, 3};
    w.write_floats(x, 3);
    w.finish();
  }
  const CliResult r = run_zerolap("inspect " + path);
  INFO(r.output.substr(0, 2000));
  CHECK(r.exit_code == 0);
  CHECK(r.output.find('\x1b') == std::string::npos);
  CHECK(r.output.find('\x07') == std::string::npos);
  CHECK_THAT(r.output, Contains("evil\\x1b[2J\\x07name") && Contains("value\\x1b[31m") &&
                           Contains("\\x1b[2Jwidths = [3, 4]") &&
                           Contains("step 7\\x1b[2J, precision bf16\\x1b]0;title\\x07"));
  CHECK(r.output.size() < 20000);  // the 100000-byte name is cut
}

TEST_CASE("zerolap inspect names a corrupt tensor escaped", "[checkpoint][cli]") {
  // The checksum pass named a damaged tensor as the file spells it: its control bytes reached
  // the terminal, and a huge name flooded it.
  const fs::path dir = fs::path(ZEROLAP_TEST_TMP) / fmt::format("inspect-{}", ::getpid());
  fs::create_directories(dir);
  const std::string path = (dir / "hostile-crc.safetensors").string();
  const std::string evil = "evil\x1b[2J\x07" + std::string(100000, 'n');
  {
    zl::SafetensorsWriter w(path, {{evil, "F32", {2}}}, {{"step", "1"}});
    const float x[2] = {1, 2};
    w.write_floats(x, 2);
    w.finish();
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() - 2] ^= 0x40;  // inside the hostile tensor
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  const CliResult r = run_zerolap("inspect " + path);
  INFO(r.output.substr(0, 2000));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains("evil\\x1b[2J\\x07n") && Contains("CRC32"));
  CHECK(r.output.find('\x1b') == std::string::npos);
  CHECK(r.output.find('\x07') == std::string::npos);
  CHECK(r.output.size() < 20000);
}

TEST_CASE("zerolap inspect says in which precision a checkpoint was trained", "[checkpoint][cli]") {
  const fs::path dir = fs::path(ZEROLAP_TEST_TMP) / fmt::format("inspect-bf16-{}", ::getpid());
  const CliResult train = run_zerolap(fmt::format(
      "train {}/configs/spirals.toml --set precision.compute=bf16 --set "
      "precision.master_weights=remainders --set train.steps=2 --set checkpoint.dir=\"{}\" --set "
      "output.dir=\"{}\"",
      ZEROLAP_SOURCE_DIR, (dir / "ckpt").string(), dir.string()));
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const CliResult r = run_zerolap("inspect " + (dir / "ckpt" / "step_00000002.safetensors").string());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("step 2, precision bf16 (reduce_dtype fp32, master_weights "
                                "remainders); parameters stored as fp32 master weights") &&
                           Contains("precision = bf16"));
}

TEST_CASE("zerolap inspect on a corrupt or missing file exits 2", "[checkpoint][cli]") {
  const std::string path = write_sample("corrupt.safetensors");
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() - 2] ^= 0x40;  // inside layers.0.bias
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  CliResult r = run_zerolap("inspect " + path);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains(path) && Contains("layers.0.bias") && Contains("CRC32"));

  fs::resize_file(path, bytes.size() / 2);
  r = run_zerolap("inspect " + path);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains(path) && Contains("truncated"));

  r = run_zerolap("inspect " + path + ".nope");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Contains(path + ".nope"));
}

TEST_CASE("zerolap inspect of a checkpoint directory or its latest pointer lists the latest",
          "[checkpoint][cli]") {
  const fs::path dir = fs::path(ZEROLAP_TEST_TMP) / fmt::format("inspect-latest-{}", ::getpid());
  const CliResult train = run_zerolap(fmt::format(
      "train {}/configs/spirals.toml --set train.steps=3 --set checkpoint.every=2 --set "
      "checkpoint.dir=\"{}\" --set output.dir=\"{}\"",
      ZEROLAP_SOURCE_DIR, (dir / "ckpt").string(), dir.string()));
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const std::string newest = (dir / "ckpt" / "step_00000003.safetensors").string();
  for (const fs::path& given : {dir / "ckpt", dir / "ckpt" / "latest"}) {
    const CliResult r = run_zerolap("inspect " + given.string());
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Contains("latest checkpoint " + newest) && Contains("step = 3"));
  }
  fs::create_directories(dir / "empty");
  const CliResult none = run_zerolap("inspect " + (dir / "empty").string());
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.output, Contains((dir / "empty").string()) && Contains("no checkpoint"));
  // A pointer that is empty, or a symlink loop, is named as such; the advice fits inspect too
  // (name the checkpoint itself), not only a resume.
  fs::create_directories(dir / "bad");
  std::ofstream(dir / "bad" / "latest").close();
  const CliResult empty = run_zerolap("inspect " + (dir / "bad").string());
  CHECK(empty.exit_code == 2);
  CHECK_THAT(empty.output, Contains("checkpoint pointer '" + (dir / "bad" / "latest").string() +
                                    "' is empty: name the checkpoint itself"));
  fs::remove(dir / "bad" / "latest");
  fs::create_symlink("latest", dir / "bad" / "latest");
  const CliResult loop = run_zerolap("inspect " + (dir / "bad").string());
  CHECK(loop.exit_code == 2);
  CHECK_THAT(loop.output, Contains("checkpoint pointer '" + (dir / "bad" / "latest").string() +
                                   "' cannot be read") && !Contains("no checkpoint to inspect"));
}
