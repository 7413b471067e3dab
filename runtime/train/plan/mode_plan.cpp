// ModePlan: the one place a mode's facts are derived from the config (see mode_plan.h).
#include "runtime/train/plan/mode_plan.h"

#include <algorithm>

#include <fmt/format.h>

namespace zl {

std::vector<std::string> optimizer_state_names(const OptimizerConfig& optimizer) {
  if (optimizer.kind != OptimizerKind::Sgd) return {"exp_avg", "exp_avg_sq"};
  if (optimizer.momentum != 0.0f) return {"momentum_buffer"};
  return {};
}

ModePlan make_mode_plan(const Mode& mode, const ParallelConfig& parallel,
                        const OptimizerConfig& optimizer, const PrecisionConfig& precision) {
  ModePlan m;
  m.mode = mode;
  m.state_floats_per_element = static_cast<int>(optimizer_state_names(optimizer).size());
  if (precision.compute == ComputePrecision::Bf16) {
    m.param_dtype = DType::BF16;
    m.reduce_dtype = precision.reduce_dtype;
    m.master_weights = precision.master_weights;
  }
  // The gradient store: stage 2's pool (stage 3 reduces its gradients as stage 2), else the fp32
  // gradients in place or their bf16 cast.
  m.gradient_store = mode.stage >= 2                  ? GradientStoreKind::ShardPool
                     : m.reduce_dtype == DType::BF16 ? GradientStoreKind::Bf16Wire
                                                     : GradientStoreKind::Fp32;
  if (mode.ddp()) return m;  // all-reduce, replicated state, no broadcast

  switch (mode.collective) {
    case CollectiveKind::AllreduceBroadcast: m.bucket_collective = CollectiveOp::AllReduce; break;
    case CollectiveKind::ReduceBroadcast: m.bucket_collective = CollectiveOp::Reduce; break;
    case CollectiveKind::ReduceScatterAllgather:
      m.bucket_collective = CollectiveOp::ReduceScatter;
      m.parameter_collective = CollectiveOp::AllGather;
      m.element_shards = true;
      m.prefetch = parallel.prefetch;
      m.reshard_after_forward = parallel.reshard_after_forward;
      break;
  }
  // Stage 3: the next forward's gathers read the stepped shards; nothing follows the step.
  m.broadcast_after_step = !m.gathers_parameters();
  m.sharded_state = true;
  switch (mode.overlap) {
    case Overlap::None: m.schedule = ScheduleKind::ZeroNone; break;
    case Overlap::AfterBackward: m.schedule = ScheduleKind::ZeroAfterBackward; break;
    case Overlap::Interleaved: m.schedule = ScheduleKind::ZeroInterleaved; break;
  }
  m.can_clip = m.schedule != ScheduleKind::ZeroInterleaved;
  return m;
}

ModePlan make_mode_plan(const ParallelConfig& parallel, const OptimizerConfig& optimizer,
                        const PrecisionConfig& precision) {
  return make_mode_plan(mode_of(parallel), parallel, optimizer, precision);
}

ModePlan make_run_mode_plan(const Config& config, int world) {
  ModePlan m = make_mode_plan(config.parallel, config.optimizer, config.precision);
  m.micro_batches = static_cast<int>(config.train.grad_accum);
  m.replicas = m.mode.replicas(world);
  return m;
}

std::int64_t ModePlan::gather_buffers(const BucketPlan& plan) const {
  if (!gathers_parameters()) return 0;
  const auto buckets = static_cast<std::int64_t>(plan.buckets.size());
  return reshard_after_forward ? std::min<std::int64_t>(buckets, prefetch + 1) : buckets;
}

ElementRange ModePlan::stepped_range(const BucketPlan& plan, const Bucket& b, int rank) const {
  if (element_shards) {
    const std::int64_t shard = b.numel / plan.world_size;
    return {b.offset + (rank % plan.world_size) * shard, shard};
  }
  return {b.offset, steps_on(b, rank) ? b.numel : 0};
}

std::int64_t ModePlan::replica_wire_numel(const BucketPlan& plan) const {
  if (replicas == 1 || !pools_gradients() || reduce_dtype != DType::BF16) return 0;
  return plan.largest_bucket_numel() / plan.world_size;
}

std::int64_t ModePlan::stepped_numel(const BucketPlan& plan, int rank) const {
  std::int64_t elements = 0;
  for (const Bucket& b : plan.buckets) elements += stepped_range(plan, b, rank).numel;
  return elements;
}

int ModePlan::stepped_buckets(const BucketPlan& plan, int rank) const {
  int buckets = 0;
  for (const Bucket& b : plan.buckets) buckets += stepped_range(plan, b, rank).numel > 0;
  return buckets;
}

std::int64_t ModePlan::state_bytes(const BucketPlan& plan, int rank) const {
  return stepped_numel(plan, rank) * state_floats_per_element *
         static_cast<std::int64_t>(sizeof(float));
}

int ModePlan::master_bytes_per_element() const {
  return param_dtype == DType::F32 ? 0 : master_weights == MasterWeights::Fp32 ? 4 : 2;
}

StepBalance step_balance(const ModePlan& mode, const BucketPlan& plan,
                         const ParameterStore& store) {
  StepBalance out;
  for (int r = 0; r < plan.world_size; ++r) {
    std::int64_t with_padding = 0, parameters = 0;
    for (const Bucket& b : plan.buckets) {
      const ElementRange range = mode.stepped_range(plan, b, r);
      with_padding += range.numel;
      // The parameter elements inside the range: a parameter may straddle shards.
      for (int id : b.param_ids) {
        const ParameterInfo& p = store.info(id);
        const std::int64_t begin = std::max(p.offset, range.offset);
        const std::int64_t end = std::min(p.offset + p.numel, range.end());
        parameters += std::max<std::int64_t>(end - begin, 0);
      }
    }
    if (r == 0 || with_padding > out.largest) out.largest = with_padding;
    if (r == 0 || with_padding < out.smallest) out.smallest = with_padding;
    if (r == 0 || parameters > out.largest_parameters) out.largest_parameters = parameters;
    if (r == 0 || parameters < out.smallest_parameters) out.smallest_parameters = parameters;
  }
  return out;
}

RankMemory rank_memory(const ModePlan& mode, const BucketPlan& plan, std::int64_t store_numel,
                       int rank) {
  RankMemory m;
  const std::int64_t gradient_bytes = mode.gradient_bytes_per_element();
  m.parameters = store_numel * dtype_size(mode.param_dtype);
  if (mode.gathers_parameters()) {
    // The rank's shard of every bucket, and the gather buffers of the largest bucket.
    m.gather_buffers =
        mode.gather_buffers(plan) * plan.largest_bucket_numel() * dtype_size(mode.param_dtype);
    m.parameters = mode.stepped_numel(plan, rank) * dtype_size(mode.param_dtype) +
                   m.gather_buffers;
  }
  if (mode.pools_gradients()) {
    m.gradient_pool = mode.pool_buffers(plan) * plan.largest_bucket_numel() * gradient_bytes +
                      mode.replica_wire_numel(plan) * dtype_size(DType::BF16);
    m.gradients = mode.stepped_numel(plan, rank) * 4 + m.gradient_pool;
  } else {
    m.gradients = store_numel * gradient_bytes;
  }
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
  const std::int64_t parameters = dtype_size(mode.param_dtype);
  const int owned = mode.master_bytes_per_element() + 4 * mode.state_floats_per_element;
  // Stage 3: parameters, gradients (stage 2's fp32 shard), masters and state all over d; stage 2:
  // all but the parameters. The gradient pool and the gather buffers are a few buckets.
  if (mode.gathers_parameters()) {
    return fmt::format("{}/d + {}/d + pool + gather buffers", parameters, 4 + owned);
  }
  if (mode.pools_gradients()) return fmt::format("{} + {}/d + pool", parameters, 4 + owned);
  // The fp32 gradient buffer, and the bf16 reduce buffer with reduce_dtype bf16.
  const int gradients = mode.gradient_bytes_per_element();
  std::string out = fmt::format("{} + 4{}", parameters, gradients > 4 ? " + 2" : "");
  if (owned == 0) return out;
  if (mode.sharded_state) return out + fmt::format(" + {}/d", owned);
  return out + fmt::format(" + {} = {}", owned, parameters + gradients + owned);
}

}  // namespace zl
