// Checkpoints under MPI (runtime/checkpoint/checkpoint.h): the gathered file holds exactly every rank's
// parameters and owned state; a resume at the same world size continues bitwise-identically in
// every mode (parameters, optimizer state, step count t and LR schedule, sampler position);
// a resume on another world size, mode or bucket size reshards the state and stays within rtol
// 1e-5 of the uninterrupted run; Trainer::run writes, prunes and resumes; bad files fail on every
// rank together.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "mpi_test_util.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/cli/training_run.h"

using namespace zl;
using namespace zl::test;
namespace fs = std::filesystem;

namespace {

constexpr int kSteps = 10;
constexpr int kSaveAt = 4;
constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;  // as the equivalence tests: parameters passing through zero

// 96 samples: a few batches per epoch, so the runs cross epoch boundaries (reshuffles); several
// buckets; a warm-up + cosine schedule that depends on t.
const std::vector<std::string> kBase = {
    "data.train_samples=96",        "parallel.bucket_cap_mb=0.004",
    "parallel.first_bucket_cap_mb=0.001", "optimizer.schedule=cosine",
    "optimizer.warmup_steps=3",     "optimizer.min_lr=0.001",
    "train.steps=10"};

// What a resumed run must reproduce: parameters, this rank's optimizer state, the position.
struct Snapshot {
  std::vector<float> params;
  std::vector<float> state;  // this rank's owned state, parameter by parameter
  std::int64_t step = 0, cursor = 0, t = 0;
};

Snapshot snapshot(Trainer& trainer) {
  Snapshot s;
  s.params = parameters_of(trainer);
  const ParameterStore& store = trainer.model().store();
  for (int id = 0; id < store.count(); ++id) {
    for (int which = 0; which < static_cast<int>(trainer.optimizer().state_names().size()); ++which) {
      if (const float* p = trainer.optimizer().param_state(id, which)) {
        s.state.insert(s.state.end(), p, p + store.info(id).numel);
      }
    }
  }
  s.step = trainer.step();
  s.cursor = trainer.batch_cursor();
  s.t = trainer.optimizer().step_count();
  return s;
}

// Every rank reads the written file and finds its parameters and its owned state in it, bitwise.
void check_file_matches(Trainer& trainer, const std::string& path) {
  const SafetensorsReader file(path);
  CHECK_NOTHROW(file.verify_checksums());
  const ParameterStore& store = trainer.model().store();
  const auto& states = trainer.optimizer().state_names();
  std::vector<float> got;
  for (int id = 0; id < store.count(); ++id) {
    const ParameterInfo& p = store.info(id);
    got.resize(static_cast<std::size_t>(p.numel));
    file.read_f32(p.name, p.shape, got.data());
    CHECK(std::memcmp(got.data(), store.param_data(id), got.size() * sizeof(float)) == 0);
    for (int which = 0; which < static_cast<int>(states.size()); ++which) {
      const float* mine = trainer.optimizer().param_state(id, which);
      if (!mine) continue;
      file.read_f32(fmt::format("optimizer.{}.{}", p.name, states[which]), p.shape, got.data());
      INFO("optimizer." << p.name << "." << states[which]);
      CHECK(std::memcmp(got.data(), mine, got.size() * sizeof(float)) == 0);
    }
  }
  CHECK(file.metadata().at("step") == std::to_string(trainer.step()));
  CHECK(file.metadata().at("sampler_position") == std::to_string(trainer.batch_cursor()));
  // The precision the run trained in (`zerolap inspect` prints it); the tensors are fp32 masters.
  const PrecisionConfig& precision = trainer.config().precision;
  CHECK(file.metadata().at("precision") == to_string(precision.compute));
  CHECK(file.metadata().at("reduce_dtype") == dtype_name(precision.reduce_dtype));
  CHECK(file.metadata().at("master_weights") == to_string(precision.master_weights));
}

std::vector<float> train_to(Trainer& trainer, std::int64_t steps) {
  while (trainer.step() < steps) trainer.train_step();
  return parameters_of(trainer);
}

// Writes a checkpoint after kSaveAt steps of `config` on `world`; returns the uninterrupted
// run's parameters after kSteps.
std::vector<float> write_and_run_through(const Config& config, const World& world,
                                         const std::string& path) {
  {
    Trainer first(config, world, quiet_options());
    train_to(first, kSaveAt);
    write_checkpoint(first.state(), path);
  }
  Trainer uninterrupted(config, world, quiet_options());
  return train_to(uninterrupted, kSteps);
}

// Loads `path` into a trainer of `config` on `world`, trains to kSteps; true when within rtol of
// `expected` (checked by every rank of `world`).
void resume_and_compare(const Config& config, const World& world, const std::string& path,
                        const std::vector<float>& expected) {
  Trainer resumed(config, world, quiet_options());
  load_checkpoint(resumed.state(), path);
  CHECK(resumed.step() == kSaveAt);
  CHECK(resumed.optimizer().step_count() == kSaveAt);
  const std::vector<float> got = train_to(resumed, kSteps);
  CHECK(identical_on_all_ranks(got, world.comm));
  CHECK(tolerance_ratio(got, expected, kRtol, kAtol) <= 1.0);
}

// Rank 0 rewrites checkpoint `path` with valid checksums, element 0 of `tensor` set to `value`
// (none when `tensor` is empty) and the metadata edits applied: what a tool that altered a
// checkpoint would leave, which the CRC32s cannot catch.
void rewrite_checkpoint(const std::string& path, const std::string& tensor, float value,
                        const std::map<std::string, std::string>& metadata_edits = {}) {
  std::vector<TensorSpec> specs;
  std::vector<std::vector<char>> data;
  std::map<std::string, std::string> meta;
  {
    const SafetensorsReader file(path);
    for (const TensorEntry& t : file.tensors()) {
      specs.push_back({t.name, t.dtype, t.shape});
      data.emplace_back(t.end - t.begin);
      file.read_data(t.begin, data.back().data(), data.back().size());
      if (t.name == tensor) std::memcpy(data.back().data(), &value, sizeof(float));
    }
    for (const auto& [k, v] : file.metadata()) {
      if (k.rfind(kDataCrcKey, 0) != 0) meta[k] = v;  // the writer records them anew
    }
  }
  for (const auto& [k, v] : metadata_edits) meta[k] = v;
  SafetensorsWriter w(path, specs, meta);
  for (const auto& bytes : data) w.write(bytes.data(), bytes.size());
  w.finish();
}

}  // namespace

TEST_CASE("resume at the same world size continues bitwise in every mode", "[checkpoint-resume]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::string dir = zl::test::shared_dir(world.comm, "checkpoint-resume");
  const std::vector<std::vector<std::string>> cases = {
      {"parallel.mode=ddp"},
      {"parallel.mode=zero", "parallel.overlap=none"},
      {"parallel.mode=zero", "parallel.overlap=after_backward"},
      {"parallel.mode=zero", "parallel.overlap=interleaved"},
      {"parallel.mode=zero", "parallel.overlap=interleaved", "parallel.collective=reduce_broadcast",
       "parallel.assignment=greedy", "train.grad_accum=2"},
      {"parallel.mode=zero", "parallel.overlap=after_backward", "optimizer.kind=sgd",
       "optimizer.lr=0.1", "optimizer.momentum=0.9", "optimizer.nesterov=true"},
      {"parallel.mode=ddp", "optimizer.kind=adamw", "optimizer.weight_decay=0.1",
       "train.clip_grad_norm=0.5"},
  };
  int index = 0;
  for (const auto& mode : cases) {
    const auto overrides = with(kBase, mode);
    INFO("world " << world.size << ": " << describe(overrides));
    const Config config = small_config(overrides);
    const std::string path = fmt::format("{}/case{}.safetensors", dir, index++);

    Snapshot expected;
    {
      Trainer uninterrupted(config, world, quiet_options());
      train_to(uninterrupted, kSteps);
      expected = snapshot(uninterrupted);
    }
    std::int64_t saved_cursor = 0;
    {
      Trainer first(config, world, quiet_options());
      train_to(first, kSaveAt);
      write_checkpoint(first.state(), path);
      check_file_matches(first, path);
      saved_cursor = first.batch_cursor();
      // kSaveAt steps of grad_accum micro-batches, plus any skipped at an epoch's end (Note
      // [Epochs and accumulation]).
      CHECK(saved_cursor >= kSaveAt * config.train.grad_accum);
    }
    Trainer resumed(config, world, quiet_options());
    load_checkpoint(resumed.state(), path);
    CHECK(resumed.step() == kSaveAt);
    CHECK(resumed.batch_cursor() == saved_cursor);
    CHECK(resumed.optimizer().step_count() == kSaveAt);
    train_to(resumed, kSteps);
    const Snapshot got = snapshot(resumed);
    CHECK(bitwise_equal(got.params, expected.params));
    CHECK(bitwise_equal(got.state, expected.state));
    CHECK(got.step == expected.step);
    CHECK(got.cursor == expected.cursor);
    CHECK(got.t == expected.t);
    CHECK(identical_on_all_ranks(got.params, world.comm));
  }
}

TEST_CASE("resume into another mode and bucket size reshards the state", "[checkpoint-reshard]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::string dir = zl::test::shared_dir(world.comm, "checkpoint-reshard-mode");
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"parallel.mode=ddp", "parallel.bucket_cap_mb=25"},
       {"parallel.mode=zero", "parallel.overlap=interleaved", "parallel.bucket_cap_mb=0.001",
        "parallel.first_bucket_cap_mb=0.0001"}},
      {{"parallel.mode=zero", "parallel.overlap=none", "parallel.assignment=greedy"},
       {"parallel.mode=zero", "parallel.overlap=after_backward", "parallel.bucket_cap_mb=0.002"}},
      {{"parallel.mode=zero", "parallel.overlap=interleaved"}, {"parallel.mode=ddp"}},
  };
  int index = 0;
  for (const auto& [write_mode, load_mode] : cases) {
    INFO("world " << world.size << ": " << describe(write_mode) << " -> " << describe(load_mode));
    const std::string path = fmt::format("{}/case{}.safetensors", dir, index++);
    const auto expected = write_and_run_through(small_config(with(kBase, write_mode)), world, path);
    resume_and_compare(small_config(with(kBase, load_mode)), world, path, expected);
  }
}

// 2 -> 3 ranks (registered at np 3): ranks 0 and 1 write with batch 6 (global 12), all three resume
// with batch 4 (global 12: the same samples per step).
TEST_CASE("resume from 2 ranks on 3 reshards the ZeRO state", "[.][checkpoint-reshard-2to3]") {
  const World world = world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 3);
  const std::string dir = zl::test::shared_dir(world.comm, "checkpoint-reshard-2to3");
  const std::string path = dir + "/from2.safetensors";
  MPI_Comm two = MPI_COMM_NULL;
  MPI_Comm_split(world.comm, world.rank < 2 ? 0 : MPI_UNDEFINED, world.rank, &two);
  std::vector<float> expected;
  if (two != MPI_COMM_NULL) {
    const auto writer = with(kBase, {"parallel.mode=zero", "parallel.overlap=interleaved",
                                     "data.batch_size=6"});
    expected = write_and_run_through(small_config(writer), world_of(two), path);
    MPI_Comm_free(&two);
  }
  // Every rank compares with the uninterrupted 2-rank run (rank 2 gets it from rank 0).
  std::int64_t count = static_cast<std::int64_t>(expected.size());
  MPI_Bcast(&count, 1, MPI_INT64_T, 0, world.comm);
  expected.resize(static_cast<std::size_t>(count));
  MPI_Bcast(expected.data(), static_cast<int>(expected.size()), MPI_FLOAT, 0, world.comm);
  const auto loader = with(kBase, {"parallel.mode=zero", "parallel.overlap=after_backward",
                                   "parallel.assignment=greedy", "data.batch_size=4"});
  resume_and_compare(small_config(loader), world, path, expected);
}

// 4 -> 1 rank (registered at np 4): all four write with batch 4 (global 16); rank 0 alone resumes
// with batch 16 in a world of its own.
TEST_CASE("resume from 4 ranks on 1 gathers the ZeRO state", "[.][checkpoint-reshard-4to1]") {
  const World world = world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 4);
  const std::string dir = zl::test::shared_dir(world.comm, "checkpoint-reshard-4to1");
  const std::string path = dir + "/from4.safetensors";
  const auto writer = with(kBase, {"parallel.mode=zero", "parallel.overlap=none",
                                   "parallel.collective=reduce_broadcast", "data.batch_size=4"});
  const auto expected = write_and_run_through(small_config(writer), world, path);
  MPI_Comm one = MPI_COMM_NULL;
  MPI_Comm_split(world.comm, world.rank == 0 ? 0 : MPI_UNDEFINED, 0, &one);
  if (one != MPI_COMM_NULL) {
    const auto loader = with(kBase, {"parallel.mode=zero", "data.batch_size=16"});
    resume_and_compare(small_config(loader), world_of(one), path, expected);
    MPI_Comm_free(&one);
  }
  MPI_Barrier(world.comm);
}

TEST_CASE("run() writes every `every` steps and at the end, prunes, and resumes", "[checkpoint-run]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::string dir = zl::test::shared_dir(world.comm, "checkpoint-run");
  const auto overrides = with(kBase, {"parallel.mode=zero", "parallel.overlap=interleaved",
                                      "checkpoint.dir=\"" + dir + "\"", "checkpoint.every=3",
                                      "checkpoint.keep=2", "train.steps=7"});
  {
    Trainer trainer(small_config(overrides), world, quiet_options());
    prepare_checkpoints(trainer.state());
    InterruptHandlers interrupts(nullptr, "");
    run_training(trainer, interrupts);
  }
  if (world.is_root()) {
    CHECK_FALSE(fs::exists(fs::path(dir) / checkpoint_file_name(3)));  // pruned: keep = 2
    CHECK(fs::exists(fs::path(dir) / checkpoint_file_name(6)));
    CHECK(latest_checkpoint(dir) == (fs::path(dir) / checkpoint_file_name(7)).string());
  }
  // resume = true picks `latest` and continues to the new end.
  Trainer resumed(small_config(with(overrides, {"checkpoint.resume=true", "train.steps=9"})), world,
                  quiet_options());
  prepare_checkpoints(resumed.state());
  CHECK(resumed.step() == 7);
  InterruptHandlers interrupts(nullptr, "");
  run_training(resumed, interrupts);
  CHECK(resumed.step() == 9);
  if (world.is_root()) {
    CHECK(latest_checkpoint(dir) == (fs::path(dir) / checkpoint_file_name(9)).string());
  }
  MPI_Barrier(world.comm);
}

TEST_CASE("steps = 0 writes the initial parameters", "[checkpoint-run]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::string dir = zl::test::shared_dir(world.comm, "checkpoint-initial");
  Trainer trainer(small_config({"train.steps=0", "checkpoint.dir=\"" + dir + "\""}), world,
                  quiet_options());
  const std::vector<float> initial = parameters_of(trainer);
  prepare_checkpoints(trainer.state());
  InterruptHandlers interrupts(nullptr, "");
  run_training(trainer, interrupts);
  const std::string path = (fs::path(dir) / checkpoint_file_name(0)).string();
  REQUIRE(fs::exists(path));
  check_file_matches(trainer, path);
  CHECK(bitwise_equal(parameters_of(trainer), initial));
  MPI_Barrier(world.comm);
}

TEST_CASE("a bad checkpoint fails on every rank together", "[checkpoint-run]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::string dir = zl::test::shared_dir(world.comm, "checkpoint-bad");
  const std::string path = dir + "/c.safetensors";
  Trainer trainer(small_config(kBase), world, quiet_options());
  trainer.train_step();
  write_checkpoint(trainer.state(), path);

  SECTION("another model") {
    Trainer other(small_config(with(kBase, {"model.widths=[8,16,4]"})), world, quiet_options());
    CHECK_THROWS_AS(load_checkpoint(other.state(), path), ReportedUserError);
  }
  SECTION("a flipped byte") {
    if (world.is_root()) {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(-7, std::ios::end);
      char c = 0;
      f.get(c);
      f.seekp(-7, std::ios::end);
      f.put(static_cast<char>(c ^ 0x08));
    }
    MPI_Barrier(world.comm);
    CHECK_THROWS_AS(load_checkpoint(trainer.state(), path), ReportedUserError);
  }
  MPI_Barrier(world.comm);
}

// Values no run writes, behind valid checksums, at every ZeRO stage (each scatters the file into
// its own bucket plan): every rank fails together with exit 2's error, naming the file and the
// tensor or key, before any rank trains. Before, a NaN parameter trained to "diverged" (exit 1).
TEST_CASE("impossible checkpoint values fail on every rank at every stage", "[checkpoint-run]") {
  const World world = world_of(MPI_COMM_WORLD);
  const std::string dir = zl::test::shared_dir(world.comm, "checkpoint-values");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<std::string>> stages = {
      {"parallel.mode=ddp"},
      {"parallel.mode=zero", "parallel.overlap=interleaved"},
      {"parallel.mode=zero", "parallel.collective=reduce_scatter_allgather",
       "parallel.zero_stage=1"},
      {"parallel.mode=zero", "parallel.collective=reduce_scatter_allgather",
       "parallel.zero_stage=2"},
      {"parallel.mode=zero", "parallel.collective=reduce_scatter_allgather",
       "parallel.zero_stage=3"}};
  int index = 0;
  for (const auto& stage : stages) {
    const Config config = small_config(with(kBase, stage));
    INFO("world " << world.size << ": " << describe(stage));
    Trainer trainer(config, world, quiet_options());
    trainer.train_step();
    const std::string weight = trainer.model().store().info(0).name;
    struct Bad {
      std::string tensor;
      float value;
      std::map<std::string, std::string> metadata;
      std::string named;
    };
    for (const Bad& bad : std::vector<Bad>{
             {weight, nan, {}, weight},
             {"optimizer." + weight + ".exp_avg", inf, {}, "exp_avg"},
             {"optimizer." + weight + ".exp_avg_sq", -1.0f, {}, "exp_avg_sq"},
             {"", 0.0f, {{"global_batch", "0"}}, "global_batch"}}) {
      const std::string path = fmt::format("{}/case{}.safetensors", dir, index++);
      write_checkpoint(trainer.state(), path);
      if (world.is_root()) rewrite_checkpoint(path, bad.tensor, bad.value, bad.metadata);
      MPI_Barrier(world.comm);
      INFO(bad.named);
      try {
        load_checkpoint(trainer.state(), path);
        FAIL("loaded");
      } catch (const ReportedUserError& e) {
        if (world.is_root()) {
          CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains(bad.named));
        }
      }
    }
  }
  MPI_Barrier(world.comm);
}
