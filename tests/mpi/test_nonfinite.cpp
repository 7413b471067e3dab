// Non-finite steps (docs/design.md, "Divergence"): a NaN input on one rank at one step (the
// ZEROLAP_FAULT_NONFINITE hook) must, in every mode, either stop every rank at that step with one
// verdict naming it (on_nonfinite = "stop"), or skip the whole step on every rank - parameters,
// optimizer state and t unchanged, ranks bitwise identical - and train on (on_nonfinite =
// "skip_step"). Run on 2 ranks; the fault is on the last rank.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>

#include "mpi_test_util.h"
#include "base/fault_stop.h"

using namespace zl;
using namespace zl::test;

namespace {

constexpr std::int64_t kBadStep = 3;

// Sets the fault hook for the test's lifetime: the last rank's input of kBadStep holds a NaN.
struct FaultAtBadStep {
  explicit FaultAtBadStep(int world_size) {
    const std::string value = std::to_string(kBadStep) + ":" + std::to_string(world_size - 1);
    setenv(kFaultNonfiniteEnvVar, value.c_str(), 1);
  }
  ~FaultAtBadStep() { unsetenv(kFaultNonfiniteEnvVar); }
};

bool all_finite(const std::vector<float>& v) {
  for (const float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

std::vector<std::vector<std::string>> modes(bool with_interleaved) {
  std::vector<std::vector<std::string>> m = {
      {"parallel.mode=ddp"},
      {"parallel.mode=zero", "parallel.overlap=none", "parallel.collective=reduce_broadcast"},
      {"parallel.mode=zero", "parallel.overlap=after_backward",
       "parallel.collective=allreduce_broadcast"},
      {"parallel.mode=zero", "parallel.overlap=after_backward",
       "parallel.collective=reduce_broadcast", "train.clip_grad_norm=1.0"},
      // ZeRO stage 2 reduce-scatters both micro-batches' NaN gradients into the shard; the next
      // step's first micro-batch overwrites it.
      {"parallel.mode=zero", "parallel.overlap=none",
       "parallel.collective=reduce_scatter_allgather", "parallel.zero_stage=2",
       "train.grad_accum=2"},
      // Stage 3: the NaN reaches the parameter shards, which the next step's gathers read.
      {"parallel.mode=zero", "parallel.overlap=after_backward",
       "parallel.collective=reduce_scatter_allgather", "parallel.zero_stage=3",
       "parallel.reshard_after_forward=false"},
  };
  if (with_interleaved) {
    m.push_back({"parallel.mode=zero", "parallel.overlap=interleaved",
                 "parallel.collective=reduce_broadcast"});
  }
  return m;
}

}  // namespace

TEST_CASE("skip_step skips a non-finite step on every rank and trains on", "[nonfinite]") {
  const World world = world_of(MPI_COMM_WORLD);
  const FaultAtBadStep fault(world.size);
  for (const auto& mode : modes(false)) {
    for (const char* optimizer : {"optimizer.kind=adam", "optimizer.kind=sgd"}) {
      const auto overrides = with(mode, {optimizer, "optimizer.momentum=0.0",
                                         "train.on_nonfinite=skip_step", "parallel.bucket_cap_mb=0.004",
                                         "parallel.first_bucket_cap_mb=0.001"});
      INFO(overrides.front() << " " << overrides[1] << " " << optimizer);
      Trainer trainer(small_config(overrides), world, quiet_options());
      const auto before = train_checking_identity(trainer, kBadStep - 1);
      REQUIRE(trainer.optimizer().step_count() == kBadStep - 1);

      trainer.train_step();  // the bad step: skipped everywhere
      const auto after = parameters_of(trainer);
      CHECK(identical_on_all_ranks(after, world.comm));
      CHECK(after == before);  // bit for bit: nothing stepped, nothing broadcast
      CHECK(trainer.step() == kBadStep);
      CHECK(trainer.optimizer().step_count() == kBadStep - 1);  // t and the LR schedule wait
      CHECK(trainer.skipped_steps() == 1);
      const StepLoss window = trainer.take_loss();
      CHECK(window.steps == kBadStep - 1);  // the skipped step's NaN loss is not in the window
      CHECK(std::isfinite(window.loss_sum));

      const auto later = train_checking_identity(trainer, 3);
      CHECK(trainer.optimizer().step_count() == kBadStep + 2);
      CHECK(trainer.skipped_steps() == 1);
      CHECK(all_finite(later));
      CHECK(later != before);
    }
  }
}

TEST_CASE("stop ends every rank at the non-finite step, naming it", "[nonfinite]") {
  const World world = world_of(MPI_COMM_WORLD);
  const FaultAtBadStep fault(world.size);
  for (const auto& mode : modes(true)) {
    INFO((mode.size() > 1 ? mode[1] : mode[0]));
    Trainer trainer(small_config(mode), world, quiet_options());
    const auto before = train_checking_identity(trainer, kBadStep - 1);
    std::string message;
    try {
      trainer.train_step();
    } catch (const NonfiniteStop& e) {
      message = e.what();
    }
    REQUIRE_FALSE(message.empty());
    CHECK_THAT(message, Catch::Contains("step 3:"));
    CHECK_THAT(message, Catch::Contains("on rank " + std::to_string(world.size - 1)));
    CHECK_THAT(message, Catch::Contains("the training loss is not finite"));
    CHECK_THAT(message, Catch::Contains("the gradient norm is not finite"));
    const Config& c = trainer.config();
    const bool checked_before_steps = c.parallel.overlap == Overlap::None ||
                                      c.train.clip_grad_norm > 0.0f;
    if (checked_before_steps) CHECK(parameters_of(trainer) == before);  // nothing stepped
  }
}

TEST_CASE("checked per log window, a stop comes at the window's end", "[nonfinite]") {
  // The CUDA cadence under "stop" without clipping, forced here on the CPU; stage 3 checks the
  // parameter shards each rank holds.
  const World world = world_of(MPI_COMM_WORLD);
  const FaultAtBadStep fault(world.size);
  TrainerOptions options = quiet_options();
  options.step_check = StepCheck::EveryLogWindow;
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{"parallel.mode=zero", "parallel.overlap=after_backward"},
        std::vector<std::string>{"parallel.mode=zero", "parallel.overlap=interleaved",
                                 "parallel.collective=reduce_scatter_allgather",
                                 "parallel.zero_stage=3"}}) {
    INFO(describe(mode));
    Trainer trainer(small_config(mode), world, options);
    for (std::int64_t s = 0; s < kBadStep + 1; ++s) trainer.train_step();  // no verdict per step
    const StepLoss window = trainer.take_loss();
    const auto sums = trainer.sum_over_ranks({window.loss_sum, trainer.window_check_value()});
    CHECK_FALSE(std::isfinite(sums[1]));  // the NaN gradient reached every rank's parameters
    CHECK_THROWS_AS(trainer.check_window(sums[0], sums[1], 1, kBadStep + 1), NonfiniteStop);
    CHECK_THROWS_WITH(trainer.check_window(sums[0], sums[1], 1, kBadStep + 1),
                      Catch::Contains("between steps 1 and 4"));
    // A window of one step (train.log_every = 1) names the step as the per-step check does.
    CHECK_THROWS_WITH(trainer.check_window(sums[0], sums[1], kBadStep + 1, kBadStep + 1),
                      Catch::Contains("diverged at step 4"));
  }
  // Before the bad step every window is finite, at stage 3 too (the shards' sum is read).
  Trainer clean(small_config({"parallel.mode=zero", "parallel.collective=reduce_scatter_allgather",
                              "parallel.zero_stage=3"}),
                world, options);
  for (std::int64_t s = 0; s < kBadStep - 1; ++s) clean.train_step();
  const auto sums = clean.sum_over_ranks({clean.take_loss().loss_sum, clean.window_check_value()});
  // The shards summed over ranks cover every parameter once: the whole layout's sum of squares.
  double whole = 0.0;
  for (const float x : parameters_of(clean)) whole += static_cast<double>(x) * x;
  CHECK(whole > 0.0);
  CHECK(sums[1] == Approx(whole).epsilon(1e-6));
  CHECK_NOTHROW(clean.check_window(sums[0], sums[1], 1, kBadStep - 1));
}
