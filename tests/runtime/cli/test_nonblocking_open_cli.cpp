// Every file zerolap reads is opened without blocking and checked to be a regular file: a FIFO, a
// directory or a device given as a config, a data file, a checkpoint or the `latest` pointer is
// exit 2 naming it, never a hang; so is a FIFO where it writes an output (metrics, the effective
// config, the trace, bench results); a pointer holding junk is echoed only as a bounded, escaped
// excerpt.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/runtime/cli/cli_test_util.h"

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

// A directory or a device where a file is read is refused by its type, as a FIFO is.
TEST_CASE("a directory or a device as a file zerolap reads is refused", "[cli][open]") {
  const fs::path dir = fresh_dir("types");
  const auto check = [](const CliResult& r, const std::string& path, const char* type) {
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains(path) && Catch::Contains(type));
  };
  check(run_zerolap_bounded("train " + dir.string(), 30), dir.string(), "directory");
  check(run_zerolap_bounded("inspect /dev/zero", 30), "/dev/zero", "character device");
  const fs::path idx = dir / "idx.toml";
  std::ofstream(idx) << "[model]\nwidths = [4, 8, 3]\n[data]\nkind = \"idx\"\n"
                     << "train_images = \"/dev/zero\"\ntrain_labels = \"/dev/zero\"\n"
                     << "test_images = \"/dev/zero\"\ntest_labels = \"/dev/zero\"\n"
                     << "[train]\nsteps = 1\n[output]\ndir = \"" << (dir / "out").string() << "\"\n";
  check(run_zerolap_bounded("train " + idx.string(), 30), "/dev/zero", "character device");
  const std::string resume = spirals_config(dir, "[checkpoint]\nresume = \"" + dir.string() + "\"\n");
  check(run_zerolap_bounded("train " + resume, 30), dir.string(), "directory");
}

TEST_CASE("a FIFO among the Fashion-MNIST files or in checkpoint.dir is refused", "[cli][open]") {
  const fs::path dir = fresh_dir("fashion_and_checkpoints");
  const fs::path fashion = dir / "fashion";
  fs::create_directories(fashion);
  std::string first;
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    const std::string fifo = make_fifo(fashion / name);
    if (first.empty()) first = fifo;
  }
  const fs::path config = dir / "fashion.toml";
  std::ofstream(config) << "[model]\nwidths = [784, 8, 10]\n[data]\nkind = \"fashion_mnist\"\n"
                        << "path = \"" << fashion.string() << "\"\n[train]\nsteps = 1\n"
                        << "[output]\ndir = \"" << (dir / "out").string() << "\"\n";
  check_refused(run_zerolap_bounded("train " + config.string(), 30), first);
  // A FIFO named as a checkpoint of checkpoint.dir: another run's unreadable file, refused.
  const fs::path ckpt = dir / "ckpt";
  fs::create_directories(ckpt);
  const std::string step = make_fifo(ckpt / "step_00000002.safetensors");
  const std::string train = spirals_config(dir, "[checkpoint]\ndir = \"" + ckpt.string() + "\"\n");
  check_refused(run_zerolap_bounded("train " + train, 30), step);
}

// Outputs too: a FIFO where zerolap writes a file would block the writer until a reader comes.
TEST_CASE("a FIFO as an output file is refused without blocking", "[cli][open]") {
  const fs::path dir = fresh_dir("outputs");
  const std::string config = spirals_config(dir);
  SECTION("metrics.csv, running the same command again") {
    REQUIRE(run_zerolap_bounded("train " + config, 60).exit_code == 0);
    fs::remove(dir / "out" / "metrics.csv");
    const std::string fifo = make_fifo(dir / "out" / "metrics.csv");
    check_refused(run_zerolap_bounded("train " + config, 30), fifo);
  }
  for (const char* name : {"config.toml", "trace.json"}) {
    DYNAMIC_SECTION(name << " with output.overwrite = true") {
      fs::create_directories(dir / "out");
      const std::string fifo = make_fifo(dir / "out" / name);
      check_refused(run_zerolap_bounded("train " + config +
                                            " --set output.overwrite=true --set output.trace=true",
                                        30),
                    fifo);
    }
  }
  SECTION("a directory named trace.json with output.overwrite = true, before the run trains") {
    fs::create_directories(dir / "out" / "trace.json" / "inside");
    const CliResult r =
        run_zerolap_bounded("train " + config + " --set output.overwrite=true", 30);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains((dir / "out" / "trace.json").string()) &&
                             Catch::Contains("a directory"));
    CHECK_THAT(r.output, !Catch::Contains("step "));
  }
  SECTION("bench.csv with output.overwrite = true") {
    fs::create_directories(dir / "out");
    const std::string fifo = make_fifo(dir / "out" / "bench.csv");
    check_refused(run_zerolap_bounded("bench " + config +
                                          " --set output.overwrite=true --set bench.steps=1 "
                                          "--set bench.warmup=0 --set 'bench.modes=[\"ddp\"]'",
                                      60),
                  fifo);
  }
}
