// What a rank allocates for the model's buffers is what `zerolap plan`, the up-front memory check
// and the bench print for it (ModePlan's rank_memory through estimate_rank_memory): parameters,
// gradients (with the bf16 wire buffer), masters and optimizer state, in every mode and precision
// the trainer runs. And the precision's GEMM math is the trainer's compute context's (one TF32
// mechanism).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "models/model.h"
#include "runtime/train/plan/memory_estimate.h"
#include "tests/mpi/mpi_test_util.h"

using namespace zl;

namespace {

void check_allocations_match_the_plan(const Config& config, const World& world) {
  Trainer trainer(config, world, test::quiet_options());
  const ParameterStore layout = Model::parameter_layout(config.model);
  const RankMemory planned = estimate_rank_memory(config, layout, trainer.plan(),
                                                      trainer.mode_plan(), world.rank);
  const RankMemory got = trainer.allocated_memory();
  test::check_allocations_equal(got, planned);
  CHECK(got.total() == planned.buffers());
}

}  // namespace

TEST_CASE("each rank allocates what the plan prints for it", "[rank-memory]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const std::vector<std::vector<std::string>> cases = {
      {"parallel.mode=ddp"},
      {"parallel.mode=zero"},
      {"parallel.mode=zero", "optimizer.kind=sgd", "optimizer.momentum=0.9"},
      {"parallel.mode=zero", "precision.compute=tf32"},
      {"parallel.mode=ddp", "precision.compute=bf16"},
      {"parallel.mode=zero", "precision.compute=bf16", "precision.reduce_dtype=bf16"},
      {"parallel.mode=zero", "precision.compute=bf16", "precision.master_weights=remainders",
       "optimizer.kind=sgd", "optimizer.momentum=0.9"},
      {"parallel.mode=zero", "precision.compute=bf16"},
      {"parallel.mode=zero", "parallel.collective=reduce_broadcast", "precision.compute=bf16",
       "precision.reduce_dtype=bf16", "precision.master_weights=remainders"},
      {"parallel.mode=zero", "optimizer.kind=sgd", "precision.compute=bf16",
       "precision.reduce_dtype=bf16"},
  };
  for (const auto& overrides : cases) {
    std::vector<std::string> all = {"parallel.bucket_cap_mb=0.004",
                                    "parallel.first_bucket_cap_mb=0.001"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    INFO(fmt::format("{}", fmt::join(all, " ")));
    check_allocations_match_the_plan(test::small_config(all), world);
  }
}

TEST_CASE("compute = tf32 is the compute context's GEMM math; fp32 keeps full fp32",
          "[rank-memory]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  Trainer tf32(test::small_config({"precision.compute=tf32"}), world, test::quiet_options());
  CHECK(tf32.compute_context().gemm_math == GemmMath::Tf32);
  Trainer fp32(test::small_config({}), world, test::quiet_options());
  CHECK(fp32.compute_context().gemm_math == GemmMath::Fp32);
}
