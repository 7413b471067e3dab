// data.global_batch_size across world sizes (runtime/config/global_batch.h): 40 steps on 4 ranks
// against 20 on 4 ranks plus 20 resumed on 2 ranks (grad_accum doubled) end within the tolerance
// of the summation order, having continued on the same samples (the same sampler position in
// samples) in the same order. Registered at np 4.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "mpi_test_util.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/config/global_batch.h"

using namespace zl;
using namespace zl::test;

namespace {

constexpr std::int64_t kSteps = 40;
constexpr std::int64_t kSaveAt = 20;
constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;

// 64 samples per step of 960: 15 steps per epoch, so the runs cross two epoch boundaries
// (reshuffles), one of them after the resume.
const std::vector<std::string> kGlobal = {"data.global_batch_size=64", "data.batch_size=16",
                                          "data.train_samples=960", "parallel.mode=zero",
                                          "train.steps=40"};

Config config_for(std::int64_t world_size) {
  Config c = small_config(kGlobal);
  apply_global_batch(c, world_size);
  return c;
}

}  // namespace

TEST_CASE("a global batch resumed on half the ranks continues on the same samples",
          "[.][global-batch]") {
  const World world = world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 4);
  const Config four = config_for(4);
  REQUIRE(four.data.batch_size == 16);
  REQUIRE(four.train.grad_accum == 1);
  const std::string path = shared_dir(world.comm, "global-batch") + "/step20.safetensors";

  std::vector<float> expected;
  std::int64_t cursor_at_save = 0;
  {
    Trainer trainer(four, world, quiet_options());
    while (trainer.step() < kSaveAt) trainer.train_step();
    cursor_at_save = trainer.batch_cursor();
    write_checkpoint(trainer.state(), path);
    while (trainer.step() < kSteps) trainer.train_step();
    expected = parameters_of(trainer);
  }
  MPI_Comm two = MPI_COMM_NULL;
  MPI_Comm_split(world.comm, world.rank < 2 ? 0 : MPI_UNDEFINED, 0, &two);
  if (two != MPI_COMM_NULL) {
    const Config half = config_for(2);
    CHECK(half.data.batch_size == 16);
    CHECK(half.train.grad_accum == 2);
    CHECK(to_toml(half) == to_toml(four));  // the saved config holds at any world size
    const World half_world = world_of(two);
    Trainer resumed(half, half_world, quiet_options());
    load_checkpoint(resumed.state(), path);
    CHECK(resumed.step() == kSaveAt);
    // Micro-batches of 32 samples instead of 64: twice the cursor, the same samples consumed.
    CHECK(resumed.batch_cursor() == 2 * cursor_at_save);
    while (resumed.step() < kSteps) resumed.train_step();
    const std::vector<float> got = parameters_of(resumed);
    CHECK(identical_on_all_ranks(got, two));
    CHECK(tolerance_ratio(got, expected, kRtol, kAtol) <= 1.0);
    MPI_Comm_free(&two);
  }
  MPI_Barrier(world.comm);
}
