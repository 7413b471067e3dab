// Every file zerolap reads is opened without blocking and checked to be a regular file: a FIFO
// given as a config, a data file, a checkpoint or the `latest` pointer is exit 2 naming it, never
// a hang; a pointer holding junk is echoed only as a bounded, escaped excerpt.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_test_util.h"

using zl::test::CliResult;
using zl::test::run_zerolap_bounded;

namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(ZEROLAP_TEST_TMP) / "nonblocking_open" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string make_fifo(const fs::path& path) {
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  return path.string();
}

std::string spirals_config(const fs::path& dir, const std::string& extra = "") {
  const fs::path path = dir / "spirals.toml";
  std::ofstream(path) << "[model]\nwidths = [2, 8, 3]\n[data]\nkind = \"spirals\"\n"
                         "train_samples = 64\ntest_samples = 32\nbatch_size = 16\n"
                         "[train]\nsteps = 2\nlog_every = 1\n[output]\ndir = \""
                      << (dir / "out").string() << "\"\n"
                      << extra;
  return path.string();
}

// Short bound: these must fail at once; a hang shows as exit 124.
void check_refused(const CliResult& r, const std::string& path) {
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains(path) && Catch::Contains("FIFO"));
}

}  // namespace

TEST_CASE("a FIFO as the config file is refused without blocking", "[cli][open]") {
  const fs::path dir = fresh_dir("config");
  const std::string fifo = make_fifo(dir / "config.toml");
  for (const char* command : {"train", "plan", "bench"}) {
    DYNAMIC_SECTION(command) {
      check_refused(run_zerolap_bounded(std::string(command) + " " + fifo, 30), fifo);
    }
  }
}

TEST_CASE("a FIFO as a data file is refused without blocking", "[cli][open]") {
  const fs::path dir = fresh_dir("data");
  const std::string images = make_fifo(dir / "train-images");
  const fs::path config = dir / "idx.toml";
  std::ofstream(config) << "[model]\nwidths = [4, 8, 3]\n[data]\nkind = \"idx\"\n"
                        << "train_images = \"" << images << "\"\ntrain_labels = \"" << images
                        << "\"\ntest_images = \"" << images << "\"\ntest_labels = \"" << images
                        << "\"\n[train]\nsteps = 1\n[output]\ndir = \"" << (dir / "out").string()
                        << "\"\n";
  check_refused(run_zerolap_bounded("train " + config.string(), 30), images);
}

TEST_CASE("a FIFO as a checkpoint or as `latest` is refused without blocking", "[cli][open]") {
  const fs::path dir = fresh_dir("checkpoint");
  SECTION("inspect FIFO") {
    const std::string fifo = make_fifo(dir / "step_00000002.safetensors");
    check_refused(run_zerolap_bounded("inspect " + fifo, 30), fifo);
  }
  SECTION("inspect a directory whose latest is a FIFO") {
    const std::string fifo = make_fifo(dir / "latest");
    check_refused(run_zerolap_bounded("inspect " + dir.string(), 30), fifo);
  }
  SECTION("train resuming from a directory whose latest is a FIFO") {
    const fs::path ckpt = dir / "ckpt";
    fs::create_directories(ckpt);
    const std::string fifo = make_fifo(ckpt / "latest");
    const std::string config =
        spirals_config(dir, "[checkpoint]\ndir = \"" + ckpt.string() + "\"\nresume = true\n");
    check_refused(run_zerolap_bounded("train " + config, 30), fifo);
  }
  SECTION("train resuming from a FIFO path") {
    const std::string fifo = make_fifo(dir / "resume.safetensors");
    const std::string config = spirals_config(dir, "[checkpoint]\nresume = \"" + fifo + "\"\n");
    check_refused(run_zerolap_bounded("train " + config, 30), fifo);
  }
}

TEST_CASE("a `latest` pointer holding junk is echoed only as a bounded, escaped excerpt",
          "[cli][open]") {
  const fs::path dir = fresh_dir("junk_latest");
  {
    std::ofstream latest(dir / "latest", std::ios::binary);
    latest << std::string("\x01\x02\x1b[31m", 7) << std::string(3000, 'x') << '\0' << "tail";
  }
  const CliResult r = run_zerolap_bounded("inspect " + dir.string(), 30);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("latest") && Catch::Contains("\\x1b"));
  CHECK_THAT(r.output, !Catch::Contains("\x1b"));
  CHECK(r.output.size() < 1000);
  SECTION("and a pointer larger than any file name is refused by its size") {
    std::ofstream(dir / "latest") << std::string(10000, 'y');
    const CliResult big = run_zerolap_bounded("inspect " + dir.string(), 30);
    INFO(big.output);
    CHECK(big.exit_code == 2);
    CHECK_THAT(big.output, Catch::Contains("larger than 4096 bytes"));
  }
}
