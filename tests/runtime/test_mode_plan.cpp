// ModePlan: the facts of each mode derived from the config (the modes table of docs/design.md),
// the collectives of one step, and the optimizer-state bytes a rank allocates.
#include <catch2/catch.hpp>

#include "models/model.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/mode_plan.h"
#include "runtime/train/sharded_optimizer.h"

using namespace zl;

namespace {

ParallelConfig parallel(ParallelMode mode, Overlap overlap, CollectiveKind collective) {
  ParallelConfig p;
  p.mode = mode;
  p.overlap = overlap;
  p.collective = collective;
  return p;
}

Model small_model() {
  ModelSpec spec;
  spec.widths = {4, 16, 16, 3};
  return Model(spec, DeviceKind::Cpu);
}

}  // namespace

TEST_CASE("each mode's facts", "[mode_plan]") {
  const OptimizerConfig adam;
  // ddp ignores overlap and collective: all-reduce, replicated state, no broadcast.
  const ModePlan ddp = make_mode_plan(
      parallel(ParallelMode::Ddp, Overlap::Interleaved, CollectiveKind::ReduceBroadcast), adam);
  CHECK(ddp.name() == "ddp");
  CHECK(ddp.schedule == StepSchedule::Ddp);
  CHECK(ddp.bucket_collective == CollectiveOp::AllReduce);
  CHECK_FALSE(ddp.broadcast_after_step);
  CHECK_FALSE(ddp.sharded_state);
  CHECK_FALSE(ddp.forward_waits_per_layer);
  CHECK(ddp.can_clip);
  CHECK(ddp.state_floats_per_element == 2);

  const ModePlan none = make_mode_plan(
      parallel(ParallelMode::Zero, Overlap::None, CollectiveKind::AllreduceBroadcast), adam);
  CHECK(none.name() == "zero/none/allreduce_broadcast");
  CHECK(none.schedule == StepSchedule::ZeroNone);
  CHECK(none.bucket_collective == CollectiveOp::AllReduce);
  CHECK(none.broadcast_after_step);
  CHECK(none.sharded_state);
  CHECK_FALSE(none.forward_waits_per_layer);
  CHECK(none.can_clip);

  const ModePlan after = make_mode_plan(
      parallel(ParallelMode::Zero, Overlap::AfterBackward, CollectiveKind::ReduceBroadcast), adam);
  CHECK(after.name() == "zero/after_backward/reduce_broadcast");
  CHECK(after.schedule == StepSchedule::ZeroAfterBackward);
  CHECK(after.bucket_collective == CollectiveOp::Reduce);
  CHECK(after.forward_waits_per_layer);
  CHECK(after.can_clip);

  const ModePlan inter = make_mode_plan(
      parallel(ParallelMode::Zero, Overlap::Interleaved, CollectiveKind::ReduceBroadcast), adam);
  CHECK(inter.schedule == StepSchedule::ZeroInterleaved);
  CHECK(inter.forward_waits_per_layer);
  CHECK_FALSE(inter.can_clip);

  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  CHECK(make_mode_plan(ParallelConfig{}, sgd).state_floats_per_element == 0);
  sgd.momentum = 0.9f;
  CHECK(make_mode_plan(ParallelConfig{}, sgd).state_floats_per_element == 1);
}

TEST_CASE("a step's collectives and each rank's optimizer state follow the mode", "[mode_plan]") {
  Model m = small_model();
  const BucketPlan plan =
      build_bucket_plan(m.store(), 1e-9, 1e-9, 2, AssignmentPolicy::RoundRobin);  // one per layer
  REQUIRE(plan.buckets.size() == 3);
  const OptimizerConfig adam;

  const ModePlan ddp = make_mode_plan(ParallelConfig{}, adam);
  const auto ddp_ops = ddp.collectives(plan);
  REQUIRE(ddp_ops.size() == 3);
  for (std::size_t i = 0; i < ddp_ops.size(); ++i) {
    CHECK(ddp_ops[i].op == CollectiveOp::AllReduce);
    CHECK(ddp_ops[i].bucket == static_cast<int>(i));
    CHECK(ddp_ops[i].bytes == plan.buckets[i].bytes());
  }

  const ModePlan zero = make_mode_plan(
      parallel(ParallelMode::Zero, Overlap::AfterBackward, CollectiveKind::ReduceBroadcast), adam);
  const auto zero_ops = zero.collectives(plan);
  REQUIRE(zero_ops.size() == 6);
  for (int b = 0; b < 3; ++b) {
    CHECK(zero_ops[static_cast<std::size_t>(b)].op == CollectiveOp::Reduce);
    CHECK(zero_ops[static_cast<std::size_t>(b)].root ==
          plan.buckets[static_cast<std::size_t>(b)].assigned_rank);
    CHECK(zero_ops[static_cast<std::size_t>(b + 3)].op == CollectiveOp::Broadcast);
    CHECK(zero_ops[static_cast<std::size_t>(b + 3)].bucket == b);
  }

  // What each rank's optimizer allocates is what the plan says, and zero's shards add up to ddp's.
  std::int64_t shards = 0;
  for (int rank = 0; rank < 2; ++rank) {
    for (const ModePlan* mode : {&ddp, &zero}) {
      ShardedOptimizer opt(adam, plan, m.store(), rank, *mode, 10);
      CHECK(opt.state_bytes() == mode->state_bytes(plan, rank));
    }
    shards += zero.state_bytes(plan, rank);
    CHECK(ddp.state_bytes(plan, rank) == m.store().total_numel() * 2 * 4);
  }
  CHECK(shards == ddp.state_bytes(plan, 0));
}
