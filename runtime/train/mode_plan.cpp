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

ModePlan make_mode_plan(const ParallelConfig& parallel, const OptimizerConfig& optimizer,
                        const PrecisionConfig& precision) {
  ModePlan m;
  m.mode = parallel.mode;
  m.state_floats_per_element = state_floats_per_element(optimizer);
  if (precision.compute == ComputePrecision::Bf16) {
    m.param_dtype = DType::BF16;
    m.reduce_dtype = precision.reduce_dtype;
    m.master_weights = precision.master_weights;
  }
  if (parallel.mode == ParallelMode::Ddp) return m;  // all-reduce, replicated state, no broadcast

  m.overlap = parallel.overlap;
  m.collective = parallel.collective;
  m.bucket_collective = parallel.collective == CollectiveKind::ReduceBroadcast
                            ? CollectiveOp::Reduce
                            : CollectiveOp::AllReduce;
  m.broadcast_after_step = true;
  m.sharded_state = true;
  switch (parallel.overlap) {
    case Overlap::None: m.schedule = ScheduleKind::ZeroNone; break;
    case Overlap::AfterBackward:
      m.schedule = ScheduleKind::ZeroAfterBackward;
      m.forward_waits_per_layer = true;
      break;
    case Overlap::Interleaved:
      m.schedule = ScheduleKind::ZeroInterleaved;
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

int ModePlan::master_bytes_per_element() const {
  if (param_dtype == DType::F32) return 0;
  return master_weights == MasterWeights::Fp32 ? 4 : 2;
}

std::int64_t ModePlan::master_bytes(const BucketPlan& plan, int rank) const {
  std::int64_t elements = 0;
  for (const Bucket& b : plan.buckets) {
    if (steps_on(b, rank)) elements += b.numel;
  }
  return elements * master_bytes_per_element();
}

std::vector<PlannedCollective> ModePlan::collectives(const BucketPlan& plan) const {
  std::vector<PlannedCollective> out;
  for (const Bucket& b : plan.buckets) {
    out.push_back({bucket_collective, b.index, reduce_dtype, b.numel * dtype_size(reduce_dtype),
                   bucket_collective == CollectiveOp::Reduce ? b.assigned_rank : -1});
  }
  if (broadcast_after_step) {
    for (const Bucket& b : plan.buckets) {
      out.push_back({CollectiveOp::Broadcast, b.index, param_dtype,
                     b.numel * dtype_size(param_dtype), b.assigned_rank});
    }
  }
  return out;
}

BytesPerParameter bytes_per_parameter(const ModePlan& mode, int world) {
  const double share = mode.sharded_state ? 1.0 / world : 1.0;
  BytesPerParameter b;
  b.parameters = static_cast<double>(dtype_size(mode.param_dtype));
  b.gradients = 4.0 + (mode.reduce_dtype == DType::BF16 ? 2.0 : 0.0);
  b.master = mode.master_bytes_per_element() * share;
  b.state = 4.0 * mode.state_floats_per_element * share;
  return b;
}

RankMemory rank_memory(const ModePlan& mode, const BucketPlan& plan, std::int64_t store_numel,
                       int rank) {
  RankMemory m;
  m.parameters = store_numel * dtype_size(mode.param_dtype);
  m.gradients = store_numel * (4 + (mode.reduce_dtype == DType::BF16 ? 2 : 0));
  m.master = mode.master_bytes(plan, rank);
  m.state = mode.state_bytes(plan, rank);
  return m;
}

std::string precision_label(const PrecisionConfig& precision) {
  if (precision.compute != ComputePrecision::Bf16) return to_string(precision.compute);
  return precision.master_weights == MasterWeights::Fp32 ? "bf16 + fp32 master"
                                                         : "bf16 + remainders";
}

std::string bytes_per_parameter_formula(const ModePlan& mode) {
  // parameters + fp32 gradients [+ bf16 wire] + (master + state), the last over d when sharded.
  const BytesPerParameter one = bytes_per_parameter(mode, 1);
  std::string out = fmt::format("{:g} + 4", one.parameters);
  if (one.gradients > 4.0) out += fmt::format(" + {:g}", one.gradients - 4.0);
  const double owned = one.master + one.state;
  if (owned == 0.0) return out;
  if (mode.sharded_state) return out + fmt::format(" + {:g}/d", owned);
  return out + fmt::format(" + {:g} = {:g}", owned, one.total());
}

}  // namespace zl
