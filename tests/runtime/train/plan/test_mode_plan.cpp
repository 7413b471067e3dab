// ModePlan: the facts of each mode derived from the config (the modes table of docs/design.md),
// the collectives of one step, and the optimizer-state bytes a rank allocates.
#include <catch2/catch.hpp>

#include "models/model.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/rank_optimizer.h"

using namespace zl;

namespace {

ParallelConfig parallel(ParallelMode mode, Overlap overlap, CollectiveKind collective) {
  ParallelConfig p;
  p.mode = mode;
  p.overlap = overlap;
  p.collective = collective;
  return p;
}

// rank_memory's buffers summed over the plan's ranks: bytes_per_parameter_formula at d = the
// plan's world size, times d and the elements, where no bucket-sized pool or buffer is added.
std::int64_t summed_buffers(const ModePlan& mode, const BucketPlan& plan, std::int64_t numel) {
  std::int64_t bytes = 0;
  for (int r = 0; r < plan.world_size; ++r) bytes += rank_memory(mode, plan, numel, r).buffers();
  return bytes;
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
  CHECK(ddp.schedule == ScheduleKind::Ddp);
  CHECK(ddp.bucket_collective == CollectiveOp::AllReduce);
  CHECK_FALSE(ddp.broadcast_after_step);
  CHECK_FALSE(ddp.sharded_state);
  CHECK(ddp.can_clip);
  CHECK(ddp.state_floats_per_element == 2);

  const ModePlan none = make_mode_plan(
      parallel(ParallelMode::Zero, Overlap::None, CollectiveKind::AllreduceBroadcast), adam);
  CHECK(none.name() == "zero/none/allreduce_broadcast");
  CHECK(none.schedule == ScheduleKind::ZeroNone);
  CHECK(none.bucket_collective == CollectiveOp::AllReduce);
  CHECK(none.broadcast_after_step);
  CHECK(none.sharded_state);
  CHECK(none.can_clip);

  const ModePlan after = make_mode_plan(
      parallel(ParallelMode::Zero, Overlap::AfterBackward, CollectiveKind::ReduceBroadcast), adam);
  CHECK(after.name() == "zero/after_backward/reduce_broadcast");
  CHECK(after.schedule == ScheduleKind::ZeroAfterBackward);
  CHECK(after.bucket_collective == CollectiveOp::Reduce);
  CHECK(after.can_clip);

  const ModePlan inter = make_mode_plan(
      parallel(ParallelMode::Zero, Overlap::Interleaved, CollectiveKind::ReduceBroadcast), adam);
  CHECK(inter.schedule == ScheduleKind::ZeroInterleaved);
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
  const auto ddp_ops = collective_program(ddp, plan);
  REQUIRE(ddp_ops.size() == 3);
  for (std::size_t i = 0; i < ddp_ops.size(); ++i) {
    CHECK(ddp_ops[i].op == CollectiveOp::AllReduce);
    CHECK(ddp_ops[i].bucket == static_cast<int>(i));
    CHECK(ddp_ops[i].bytes() == plan.buckets[i].bytes());
  }

  const ModePlan zero = make_mode_plan(
      parallel(ParallelMode::Zero, Overlap::AfterBackward, CollectiveKind::ReduceBroadcast), adam);
  const auto zero_ops = collective_program(zero, plan);
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
      RankOptimizer opt(adam, plan, m.store(), rank, *mode, 10);
      CHECK(opt.state_bytes() == mode->state_bytes(plan, rank));
    }
    shards += zero.state_bytes(plan, rank);
    CHECK(ddp.state_bytes(plan, rank) == m.store().total_numel() * 2 * 4);
  }
  CHECK(shards == ddp.state_bytes(plan, 0));
}

TEST_CASE("precision: wire and broadcast bytes, masters, bytes per parameter", "[mode_plan]") {
  const Model model = small_model();
  const OptimizerConfig adam;
  const ParallelConfig zero =
      parallel(ParallelMode::Zero, Overlap::None, CollectiveKind::AllreduceBroadcast);
  const BucketPlan plan = build_bucket_plan(model.store(), 1e-9, 1e-9, 2, AssignmentPolicy::RoundRobin);
  REQUIRE(plan.buckets.size() >= 2);

  // fp32 (and tf32): 4-byte collectives, no masters; the formula of today's zero + Adam.
  PrecisionConfig tf32;
  tf32.compute = ComputePrecision::Tf32;
  const ModePlan fp32 = make_mode_plan(zero, adam, tf32);
  CHECK(fp32.param_dtype == DType::F32);
  CHECK(fp32.master_bytes(plan, 0) == 0);
  for (const ProgramEntry& c : collective_program(fp32, plan)) {
    CHECK(c.bytes() == plan.buckets[static_cast<std::size_t>(c.bucket)].numel * 4);
  }
  CHECK(bytes_per_parameter_formula(fp32) == "4 + 4 + 8/d");
  const std::int64_t total = model.store().total_numel();
  CHECK(summed_buffers(fp32, plan, total) == total * (2 * (4 + 4) + 8));

  // bf16, fp32 reduce: 4-byte gradient collectives, 2-byte broadcasts, 4-byte masters on owners.
  PrecisionConfig bf16;
  bf16.compute = ComputePrecision::Bf16;
  const ModePlan m = make_mode_plan(zero, adam, bf16);
  CHECK(m.param_dtype == DType::BF16);
  for (const ProgramEntry& c : collective_program(m, plan)) {
    const std::int64_t numel = plan.buckets[static_cast<std::size_t>(c.bucket)].numel;
    CHECK(c.bytes() == numel * (c.op == CollectiveOp::Broadcast ? 2 : 4));
  }
  for (int r = 0; r < 2; ++r) {
    CHECK(m.master_bytes(plan, r) == plan.numel_assigned_to(r) * 4);
    const RankMemory mem = rank_memory(m, plan, model.store().total_numel(), r);
    CHECK(mem.parameters == model.store().total_numel() * 2);
    CHECK(mem.gradients == model.store().total_numel() * 4);
    CHECK(mem.state == plan.numel_assigned_to(r) * 8);
  }
  CHECK(bytes_per_parameter_formula(m) == "2 + 4 + 12/d");
  CHECK(summed_buffers(m, plan, total) == total * (2 * (2 + 4) + 12));

  // bf16 reduce and remainders: 2-byte gradient collectives (plus the wire buffer), 2-byte masters.
  bf16.reduce_dtype = DType::BF16;
  bf16.master_weights = MasterWeights::Remainders;
  const ModePlan r = make_mode_plan(zero, adam, bf16);
  for (const ProgramEntry& c : collective_program(r, plan)) {
    CHECK(c.bytes() == plan.buckets[static_cast<std::size_t>(c.bucket)].numel * 2);
  }
  CHECK(r.master_bytes(plan, 1) == plan.numel_assigned_to(1) * 2);
  CHECK(bytes_per_parameter_formula(r) == "2 + 4 + 2 + 10/d");

  // ddp replicates masters and state: Megatron's 18 bytes for bf16 + fp32 master + Adam.
  const ModePlan ddp = make_mode_plan(ParallelConfig{}, adam, PrecisionConfig{ComputePrecision::Bf16});
  CHECK(bytes_per_parameter_formula(ddp) == "2 + 4 + 12 = 18");
  CHECK(summed_buffers(ddp, plan, total) == total * 2 * 18);
  CHECK(ddp.master_bytes(plan, 1) == model.store().total_numel() * 4);
  // The precision of fp32 compute leaves reduce_dtype and master_weights inert.
  CHECK(make_mode_plan(zero, adam).master_bytes_per_element() == 0);
}
