// ModePlan: the one place a mode's facts are derived from the config (see mode_plan.h).
#include "runtime/train/mode_plan.h"

#include <fmt/format.h>

namespace zl {

int state_floats_per_element(const OptimizerConfig& optimizer) {
  switch (optimizer.kind) {
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW: return 2;
    case OptimizerKind::Sgd: return optimizer.momentum != 0.0f ? 1 : 0;
  }
  return 0;
}

ModePlan make_mode_plan(const ParallelConfig& parallel, const OptimizerConfig& optimizer) {
  ModePlan m;
  m.mode = parallel.mode;
  m.state_floats_per_element = state_floats_per_element(optimizer);
  if (parallel.mode == ParallelMode::Ddp) return m;  // all-reduce, replicated state, no broadcast

  m.overlap = parallel.overlap;
  m.collective = parallel.collective;
  m.bucket_collective = parallel.collective == CollectiveKind::ReduceBroadcast
                            ? CollectiveOp::Reduce
                            : CollectiveOp::AllReduce;
  m.broadcast_after_step = true;
  m.sharded_state = true;
  switch (parallel.overlap) {
    case Overlap::None: m.schedule = StepSchedule::ZeroNone; break;
    case Overlap::AfterBackward:
      m.schedule = StepSchedule::ZeroAfterBackward;
      m.forward_waits_per_layer = true;
      break;
    case Overlap::Interleaved:
      m.schedule = StepSchedule::ZeroInterleaved;
      m.forward_waits_per_layer = true;
      m.can_clip = false;
      break;
  }
  return m;
}

std::string ModePlan::name() const {
  if (mode == ParallelMode::Ddp) return "ddp";
  return fmt::format("zero/{}/{}", to_string(overlap), to_string(collective));
}

std::int64_t ModePlan::state_bytes(const BucketPlan& plan, int rank) const {
  std::int64_t elements = 0;
  for (const Bucket& b : plan.buckets) {
    if (steps_on(b, rank)) elements += b.numel;
  }
  return elements * state_floats_per_element * static_cast<std::int64_t>(sizeof(float));
}

std::vector<PlannedCollective> ModePlan::collectives(const BucketPlan& plan) const {
  std::vector<PlannedCollective> out;
  for (const Bucket& b : plan.buckets) {
    out.push_back({bucket_collective, b.index, b.bytes(),
                   bucket_collective == CollectiveOp::Reduce ? b.assigned_rank : -1});
  }
  if (broadcast_after_step) {
    for (const Bucket& b : plan.buckets) {
      out.push_back({CollectiveOp::Broadcast, b.index, b.bytes(), b.assigned_rank});
    }
  }
  return out;
}

}  // namespace zl
