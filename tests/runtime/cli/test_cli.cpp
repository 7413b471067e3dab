// The `zerolap` executable end to end: exit codes (0 ok, 2 bad input) and messages that name the
// key and file, --help/--version, `plan`, and a short `train` writing its metrics file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "tests/runtime/cli/cli_test_util.h"
#include "kernels/gemm.h"

using zl::test::CliResult;
using zl::test::run_zerolap;
using zl::test::run_zerolap_stdout_to;

namespace {

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::path(ZEROLAP_TEST_TMP) / "cli" / name;
  std::filesystem::create_directories(dir);
  return dir.string();
}

// An empty output.dir: a run refuses to replace another run's outputs (docs/reliability.md), and
// an earlier build's test run may have left some here.
std::string fresh_output_dir(const std::string& name) {
  const auto dir = std::filesystem::path(ZEROLAP_TEST_TMP) / "cli" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string write_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::path(temp_dir("configs")) / name;
  std::ofstream(path) << text;
  return path.string();
}

const char* kSpirals = R"([model]
kind = "mlp"
widths = [2, 16, 3]
[data]
kind = "spirals"
batch_size = 16
train_samples = 300
test_samples = 60
[train]
steps = 30
log_every = 10
)";

}  // namespace

TEST_CASE("--help and --version exit 0", "[cli]") {
  const CliResult help = run_zerolap("--help");
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.output, Catch::Contains("train") && Catch::Contains("plan"));
  const CliResult version = run_zerolap("--version");
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.output, Catch::Contains("zerolap"));
  // It names the CPU GEMM library, its version and the kernel in use (kernels/gemm_info.h).
  CHECK_THAT(version.output, Catch::Contains("CPU GEMM: oneDNN ") && Catch::Contains("f32 kernel"));
  // And how bf16 GEMMs run, so a user knows when they are emulated (and slower).
  CHECK_THAT(version.output,
             Catch::Contains(zl::cpu_gemm_bf16_native()
                                 ? ", bf16 native matmul"
                                 : ", bf16 through fp32 (no native bf16 matmul on this CPU"));
}

TEST_CASE("bad command lines and configs exit 2 naming what and where", "[cli]") {
  SECTION("unknown flag") { CHECK(run_zerolap("train --bogus x.toml").exit_code == 2); }
  SECTION("missing config file") {
    const CliResult r = run_zerolap("train /nonexistent/zl.toml");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("/nonexistent/zl.toml"));
  }
  SECTION("unknown key, with file and line") {
    const auto path = write_file("unknown.toml", std::string(kSpirals) + "[optimizer]\nlrr = 1\n");
    const CliResult r = run_zerolap("train " + path);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("unknown.toml:13") && Catch::Contains("lrr"));
  }
  SECTION("wrong type") {
    const auto path = write_file("type.toml", std::string(kSpirals) + "[optimizer]\nlr = \"fast\"\n");
    const CliResult r = run_zerolap("train " + path);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("optimizer.lr"));
  }
  SECTION("out of range through --set") {
    const auto path = write_file("ok.toml", kSpirals);
    const CliResult r = run_zerolap("train " + path + " --set optimizer.lr=-1");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("--set optimizer.lr"));
  }
  SECTION("model does not fit the data") {
    const auto path = write_file("ok.toml", kSpirals);
    const CliResult r = run_zerolap("train " + path + " --set model.widths=[5,16,3]");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("model.widths"));
  }
  SECTION("train.epochs whose step count overflows") {
    // Used to overflow epochs x steps per epoch and report "-1 steps".
    const auto path = write_file("ok.toml", kSpirals);
    const CliResult r = run_zerolap("train " + path + " --set train.epochs=6654215044731940711");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("train.epochs = 6654215044731940711") &&
                             Catch::Contains("lower train.epochs"));
  }
  SECTION("a model larger than the machine") {
    // Used to be OOM-killed minutes later, or to end in a bare std::bad_alloc.
    const auto path = write_file("ok.toml", kSpirals);
    // 40 weights of 46000 x 46000: about 1.3 TiB of training state, each layer one MPI call's
    // worth (a larger layer is refused for that first: test_config_limits_cli.cpp).
    std::string widths = "[2";
    for (int i = 0; i < 41; ++i) widths += ",46000";
    const CliResult r = run_zerolap("train " + path + " --set model.widths=" + widths + ",3]");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("one rank needs an estimated") &&
                             Catch::Contains("TiB") && Catch::Contains("(MemAvailable)") &&
                             Catch::Contains("lower model.widths"));
  }
  SECTION("a device as the config file") {
    // Used to read /dev/zero forever.
    const CliResult r = run_zerolap("train /dev/zero");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("'/dev/zero' is not a regular file"));
  }
}

TEST_CASE("an unknown command is named, exit 2", "[cli]") {
  const CliResult r = run_zerolap("foo configs/spirals.toml");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("unknown command 'foo'") && Catch::Contains("train, plan"));
  // An unknown option before the command: CLI11 alone said only that a command is required.
  for (const char* line : {"--bogus", "--bogus train configs/spirals.toml"}) {
    const CliResult option = run_zerolap(line);
    CHECK(option.exit_code == 2);
    CHECK_THAT(option.output, Catch::Contains("unknown option '--bogus'") &&
                                  Catch::Contains("train, plan"));
  }
}

// Every rank of a launch parses the same command line before MPI starts: one of them (the
// launcher's rank 0, or a process started alone) says what is wrong, as every other error does.
TEST_CASE("a malformed command line is one error, exit 2", "[cli]") {
  const CliResult missing = run_zerolap("train");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.output, Catch::StartsWith("zerolap: error: config is required") &&
                                 Catch::Contains("zerolap train --help"));
  const CliResult unknown = run_zerolap("bench configs/spirals.toml --bogus");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output,
             Catch::StartsWith("zerolap: error: The following argument was not expected: --bogus") &&
                 Catch::Contains("zerolap bench --help"));
  for (const char* args : {"train", "foo configs/spirals.toml", "train --help"}) {
    const CliResult other_rank = run_zerolap(args, "OMPI_COMM_WORLD_RANK=1");
    INFO(args);
    CHECK(other_rank.output.empty());
  }
  CHECK(run_zerolap("train", "OMPI_COMM_WORLD_RANK=1").exit_code == 2);
}

// `config` prints what a run would use, as the reader reads it (dotted keys included) with --set
// applied: scripts/supervise.sh asks it where a run writes instead of reading TOML itself.
TEST_CASE("config prints the effective config, dotted keys and --set applied", "[cli]") {
  const std::string dotted = "checkpoint.dir = \"ft_ck\"\n"
                             "checkpoint.resume = \"base/s.safetensors\"\n"
                             "output.dir = \"ft\"\n";
  const std::string path = write_file("dotted.toml", dotted + kSpirals);
  const CliResult r = run_zerolap("config " + path + " --set output.dir=other");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("[checkpoint]\ndir = \"ft_ck\"\n") &&
                           Catch::Contains("resume = \"base/s.safetensors\"\n") &&
                           Catch::Contains("[output]\ndir = \"other\"\n") &&
                           Catch::Contains("steps = 30\n"));
  const CliResult bad = run_zerolap("config " + path + " --set checkpoint.every=-1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("checkpoint.every"));
}

TEST_CASE("config under a launcher speaks on rank 0 alone, with every rank's exit code", "[cli]") {
  // It starts no MPI: the launcher's rank variable is what tells the ranks apart (as mpirun -np 3
  // would set it), so the config, or its error, is printed once, not once per rank.
  const std::string path = write_file("ranks.toml", kSpirals);
  for (const char* rank : {"OMPI_COMM_WORLD_RANK=1", "PMIX_RANK=2", "SLURM_PROCID=3"}) {
    INFO(rank);
    const CliResult quiet = run_zerolap("config " + path, std::string("env ") + rank);
    CHECK(quiet.exit_code == 0);
    CHECK(quiet.output.empty());
    const CliResult bad = run_zerolap("config " + path + " --set checkpoint.every=-1",
                                      std::string("env ") + rank);
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.empty());
  }
  const CliResult first = run_zerolap("config " + path, "env OMPI_COMM_WORLD_RANK=0");
  CHECK(first.exit_code == 0);
  CHECK_THAT(first.output, Catch::Contains("[model]"));
}

// A report that cannot be written is a failure (exit 1) that says so, never a silent exit 0 or a
// silent exit 1: whether the command printed it at its end (plan, config) or flushed it as it
// went (train's progress lines).
TEST_CASE("a command whose stdout cannot be written exits 1 saying so", "[cli]") {
  if (!std::filesystem::exists("/dev/full")) {
    WARN("no /dev/full here: skipping");  // a skip is never silent
    return;
  }
  const auto path = write_file("stdout.toml", kSpirals);
  const std::string out_dir = fresh_output_dir("stdout_full");
  const std::string commands[] = {"plan " + path, "config " + path,
                                  "train " + path + " --set output.dir=" + out_dir};
  for (const std::string& command : commands) {
    INFO(command);
    const CliResult full = run_zerolap_stdout_to(command, "/dev/full");
    CHECK(full.exit_code == 1);
    CHECK_THAT(full.output, Catch::Contains("zerolap: error: cannot write to standard output: "
                                            "No space left on device"));
  }
  // Written, it is exit 0 with nothing on stderr.
  const CliResult written = run_zerolap_stdout_to("plan " + path, "/dev/null");
  CHECK(written.exit_code == 0);
  CHECK(written.output.empty());
}

TEST_CASE("plan prints the bucket table for a given world size", "[cli]") {
  const auto path = write_file("ok.toml", kSpirals);
  // A tiny cap gives one bucket per module (Note [Bucket order]): 2 linear layers, 2 buckets.
  const CliResult r = run_zerolap("plan " + path + " --world 3 --set parallel.mode=zero "
                       "--set parallel.bucket_cap_mb=1e-9 --set parallel.first_bucket_cap_mb=1e-9");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("2 buckets") && Catch::Contains("layers.1.weight") &&
                           Catch::Contains("optimizer state") &&
                           Catch::Contains("largest rank: "));
  // The bytes per parameter of the config's precision and mode, as a formula in d.
  CHECK_THAT(r.output, Catch::Contains("bytes per parameter per rank (fp32, reduce_dtype fp32, "
                                       "adam, zero/none/allreduce_broadcast)") &&
                           Catch::Contains("formula 4 + 4 + 8/d"));
  const CliResult tf32 = run_zerolap("plan " + path + " --set precision.compute=tf32");
  CHECK(tf32.exit_code == 0);
  CHECK_THAT(tf32.output, Catch::Contains("(tf32, reduce_dtype fp32, adam, ddp)") &&
                              Catch::Contains("formula 4 + 4 + 8 = 16"));
  // One memory table: per rank the plan's buffers (masters too in bf16) and the activations.
  CHECK_THAT(r.output, Catch::Contains("memory per rank (estimated") &&
                           Catch::Contains("activations"));
  // bf16 on any CPU (through fp32 where oneDNN has no bf16 matmul).
  const CliResult bf16 = run_zerolap("plan " + path + " --world 8 --set parallel.mode=zero "
                                     "--set precision.compute=bf16");
  CHECK(bf16.exit_code == 0);
  CHECK_THAT(bf16.output, Catch::Contains("(bf16 + fp32 master, reduce_dtype fp32, adam, "
                                          "zero/none/allreduce_broadcast)") &&
                              Catch::Contains("formula 2 + 4 + 12/d; the largest rank holds ") &&
                              Catch::Contains("master "));
}

TEST_CASE("plan and train with element shards at stage 1 and 2", "[cli]") {
  const auto path = write_file("shards.toml", kSpirals);
  const std::string shards = " --set parallel.mode=zero "
                             "--set parallel.collective=reduce_scatter_allgather";
  const CliResult plan = run_zerolap("plan " + path + " --world 4" + shards +
                                     " --set parallel.assignment=greedy");
  CHECK(plan.exit_code == 0);
  // Every rank steps its shard of every bucket: the assignment is unused, the balance even.
  CHECK_THAT(plan.output, Catch::Contains("assignment greedy (unused: rank r owns shard r") &&
                              Catch::Contains("shards") && Catch::Contains("balance: ") &&
                              Catch::Contains("formula 4 + 4 + 8/d; the largest rank holds "));
  const CliResult two = run_zerolap("plan " + path + " --world 4" + shards +
                                    " --set parallel.zero_stage=2");
  CHECK(two.exit_code == 0);
  CHECK_THAT(two.output, Catch::Contains("formula 4 + 12/d + pool") &&
                             Catch::Contains("gradient pool: 1 of 2 buffers"));
  // Stage 3 names its gather buffers, and says when bucket-sized buffers outweigh the shards.
  const CliResult three = run_zerolap("plan " + path + " --world 4" + shards +
                                      " --set parallel.zero_stage=3");
  CHECK(three.exit_code == 0);
  CHECK_THAT(three.output, Catch::Contains("gather buffers: 1 of the largest bucket") &&
                               Catch::Contains("a smaller parallel.bucket_cap_mb shrinks them"));
  // Twenty 32x32 layers, a bucket each: the buffers are a few small buckets.
  std::string widths = "2";
  for (int i = 0; i < 20; ++i) widths += ",32";
  const CliResult small = run_zerolap(
      "plan " + path + " --world 2" + shards +
      " --set parallel.zero_stage=3 --set parallel.bucket_cap_mb=0.001 "
      "--set parallel.first_bucket_cap_mb=0.001 --set 'model.widths=[" + widths + ",3]'");
  INFO(small.output);
  CHECK(small.exit_code == 0);
  CHECK_THAT(small.output, Catch::Contains("gather buffers: 2 of the largest bucket") &&
                               !Catch::Contains("shrinks them"));
  const auto out = fresh_output_dir("train_shards");
  const CliResult train = run_zerolap("train " + path + shards + " --set output.dir=\"" + out +
                                      "\"");
  CHECK(train.exit_code == 0);
  const CliResult stage2 = run_zerolap("train " + path + shards +
                                       " --set parallel.zero_stage=2 --set output.dir=\"" +
                                       fresh_output_dir("train_stage2") + "\"");
  CHECK(stage2.exit_code == 0);
  // Stage 2 with a bucket collective, or stage 0: bad input naming the keys.
  const CliResult bucket_stage2 =
      run_zerolap("train " + path + " --set parallel.mode=zero --set parallel.zero_stage=2 "
                  "--set parallel.collective=reduce_broadcast");
  CHECK(bucket_stage2.exit_code == 2);
  CHECK_THAT(bucket_stage2.output, Catch::Contains("parallel.zero_stage") &&
                                       Catch::Contains("parallel.collective"));
  const CliResult stage0 = run_zerolap("train " + path + shards + " --set parallel.zero_stage=0");
  CHECK(stage0.exit_code == 2);
  CHECK_THAT(stage0.output, Catch::Contains("parallel.zero_stage"));
}

TEST_CASE("plan at scale: a distribution over the ranks, sizes in MiB, pointers into docs/",
          "[cli]") {
  const auto path = write_file("ok.toml", kSpirals);
  const CliResult r = run_zerolap("plan " + path + " --world 512 --set parallel.mode=zero "
                                  "--link-gbps 100 --compute-ms 2");
  CHECK(r.exit_code == 0);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') < 80);  // not a row per rank (512)
  CHECK_THAT(r.output, Catch::Contains("over 512 ranks") && Catch::Contains("median") &&
                           Catch::Contains("owned elements") && Catch::Contains("KiB") &&
                           Catch::Contains("docs/bench.md") &&
                           !Catch::Contains("Scaling model]"));  // no source note cited
  CHECK_THAT(r.output, !Catch::Contains("\n   511  "));
  // Without --world: 1 rank, said so, and no all-zero communication table.
  const CliResult one = run_zerolap("plan " + path + " --link-gbps 100");
  CHECK(one.exit_code == 0);
  CHECK_THAT(one.output, Catch::Contains("planned for 1 rank") &&
                             Catch::Contains("no communication at 1 rank") &&
                             !Catch::Contains("modelled communication per step at 1 ranks"));
  // A small world keeps its per-rank rows, with sizes for people.
  const CliResult three = run_zerolap("plan " + path + " --world 3");
  CHECK_THAT(three.output, Catch::Contains("     2  ") && Catch::Contains(" KiB"));
}

TEST_CASE("plan lays out a model too large to allocate", "[cli]") {
  // [784, 100000000, 10] used to print a bare std::bad_alloc.
  const CliResult r = run_zerolap("plan " + std::string(ZEROLAP_SOURCE_DIR) +
                                  "/configs/fashion_mnist_mlp.toml --set "
                                  "model.widths=[784,100000000,10]");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("layers.0.weight") &&
                           Catch::Contains("largest rank: ") &&
                           Catch::Contains("TiB"));
}

TEST_CASE("train with tf32 on the CPU says it is fp32; bf16 trains, and the effective config "
          "records it",
          "[cli]") {
  const auto out = fresh_output_dir("train_tf32");
  std::filesystem::remove_all(out);  // a bf16 run of an earlier test run would be another run's
  const auto path = write_file("ok.toml", kSpirals);
  const CliResult tf32 = run_zerolap("train " + path + " --set output.dir=\"" + out +
                                     "\" --set train.steps=2 --set precision.compute=tf32");
  INFO(tf32.output);
  CHECK(tf32.exit_code == 0);
  CHECK_THAT(tf32.output, Catch::Contains("precision.compute = \"tf32\" on the CPU"));
  // Another config into the same output.dir: it replaces the tf32 run's files only when asked.
  const CliResult bf16 = run_zerolap("train " + path + " --set output.dir=\"" + out +
                                     "\" --set train.steps=2 --set precision.compute=bf16 "
                                     "--set output.overwrite=true");
  INFO(bf16.output);
  CHECK(bf16.exit_code == 0);
  CHECK_THAT(bf16.output, Catch::Contains("final step 2  test_loss"));
  std::ifstream effective(std::filesystem::path(out) / "config.toml");
  const std::string config((std::istreambuf_iterator<char>(effective)),
                           std::istreambuf_iterator<char>());
  CHECK_THAT(config, Catch::Contains("[precision]\ncompute = \"bf16\""));
}

TEST_CASE("train runs and writes a metrics CSV with a header and rows", "[cli]") {
  const auto out = fresh_output_dir("train_out");
  const auto path = write_file("ok.toml", kSpirals);
  const CliResult r = run_zerolap("train " + path + " --set output.dir=\"" + out + "\"");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("step     30/30") && Catch::Contains("test_accuracy"));
  std::ifstream metrics(std::filesystem::path(out) / "metrics.csv");
  std::string header, line;
  std::getline(metrics, header);
  CHECK_THAT(header, Catch::StartsWith("step,epoch,train_loss,train_accuracy,test_loss,test_accuracy,samples_per_s"));
  int rows = 0;
  while (std::getline(metrics, line)) ++rows;
  CHECK(rows == 4);  // logs at 10, 20, 30 and the final evaluation
}

// Every line the bench prints fits 100 columns unless --wide, as its tables do: its first line
// was 175 columns and its per-run lines reached 110 with long mode names, rounds and precisions.
TEST_CASE("bench lines fit 100 columns unless --wide", "[cli]") {
  const auto out = fresh_output_dir("bench_lines");
  const auto path = write_file("bench_lines_with_a_long_descriptive_config_name.toml", kSpirals);
  const std::string args =
      "bench " + path + " --set output.dir=\"" + out + "\" --set output.overwrite=true " +
      "--set bench.steps=1 --set bench.warmup=0 --set bench.rounds=2 --set "
      "'bench.precision=[\"fp32\",\"tf32\"]' --set "
      "'bench.modes=[\"zero3/interleaved/reduce_scatter_allgather\"]' --set "
      "link.bandwidth_gbps=100 --set link.latency_us=5";
  const auto widest = [](const std::string& text) {
    std::istringstream lines(text);
    std::size_t most = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.size() > 100) UNSCOPED_INFO("wider than 100: " << line);
      most = std::max(most, line.size());
    }
    return most;
  };
  const CliResult narrow = run_zerolap(args);
  INFO(narrow.output);
  REQUIRE(narrow.exit_code == 0);
  CHECK_THAT(narrow.output, Catch::Contains("[4/4] round 2/2: tf32 ") && Catch::Contains("zerolap bench:"));
  CHECK(widest(narrow.output) <= 100);
  const CliResult wide = run_zerolap(args + " --wide");
  REQUIRE(wide.exit_code == 0);
  CHECK(widest(wide.output) > 100);  // the full tables, and the first line whole
}
