// ModePlan: the one place a mode's facts are derived from the config (see mode_plan.h).
#include "runtime/train/mode_plan.h"

#include <algorithm>

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
  switch (parallel.collective) {
    case CollectiveKind::AllreduceBroadcast: m.bucket_collective = CollectiveOp::AllReduce; break;
    case CollectiveKind::ReduceBroadcast: m.bucket_collective = CollectiveOp::Reduce; break;
    case CollectiveKind::ReduceScatterAllgather:
      m.bucket_collective = CollectiveOp::ReduceScatter;
      m.parameter_collective = CollectiveOp::AllGather;
      m.element_shards = true;
      m.zero_stage = parallel.zero_stage;
      m.prefetch = parallel.prefetch;
      m.reshard_after_forward = parallel.reshard_after_forward;
      break;
  }
  // Stage 3: the next forward's gathers read the stepped shards; nothing follows the step.
  m.broadcast_after_step = !m.gathers_parameters();
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

ModePlan make_run_mode_plan(const Config& config, int world) {
  ModePlan m = make_mode_plan(config.parallel, config.optimizer, config.precision);
  m.micro_batches = static_cast<int>(config.train.grad_accum);
  if (m.element_shards && config.link.ranks > world) m.shard_ranks = config.link.ranks;
  return m;
}

std::string ModePlan::name() const {
  if (mode == ParallelMode::Ddp) return "ddp";
  return fmt::format("zero{}/{}/{}", zero_stage >= 2 ? std::to_string(zero_stage) : "",
                     to_string(overlap),
                     to_string(collective));
}

std::int64_t ModePlan::gather_buffers(const BucketPlan& plan) const {
  if (!gathers_parameters()) return 0;
  const auto buckets = static_cast<std::int64_t>(plan.buckets.size());
  return reshard_after_forward ? std::min<std::int64_t>(buckets, prefetch + 1) : buckets;
}

ElementRange ModePlan::stepped_range(const BucketPlan& plan, const Bucket& b, int rank) const {
  if (element_shards) {
    const std::int64_t shard = b.numel / plan.world_size;
    const std::int64_t stepped = shard_ranks > plan.world_size ? b.numel / shard_ranks : shard;
    return {b.offset + rank * shard, stepped};
  }
  return {b.offset, steps_on(b, rank) ? b.numel : 0};
}

std::int64_t ModePlan::stepped_numel(const BucketPlan& plan, int rank) const {
  std::int64_t elements = 0;
  for (const Bucket& b : plan.buckets) elements += stepped_range(plan, b, rank).numel;
  return elements;
}

std::int64_t ModePlan::state_bytes(const BucketPlan& plan, int rank) const {
  return stepped_numel(plan, rank) * state_floats_per_element *
         static_cast<std::int64_t>(sizeof(float));
}

int ModePlan::master_bytes_per_element() const {
  if (param_dtype == DType::F32) return 0;
  return master_weights == MasterWeights::Fp32 ? 4 : 2;
}

std::int64_t ModePlan::master_bytes(const BucketPlan& plan, int rank) const {
  return stepped_numel(plan, rank) * master_bytes_per_element();
}

std::vector<PlannedCollective> ModePlan::collectives(const BucketPlan& plan) const {
  std::vector<PlannedCollective> out;
  // Stages 2 and 3 reduce every micro-batch into the shard; the others once, in the last.
  const int reducing = zero_stage >= 2 ? micro_batches : 1;
  for (int micro = micro_batches - reducing; micro < micro_batches; ++micro) {
    for (const Bucket& b : plan.buckets) {
      out.push_back({bucket_collective, b.index, micro, reduce_dtype,
                     b.numel * dtype_size(reduce_dtype),
                     bucket_collective == CollectiveOp::Reduce ? b.assigned_rank : -1});
    }
  }
  if (broadcast_after_step) {
    std::vector<const Bucket*> order;
    for (const Bucket& b : plan.buckets) order.push_back(&b);
    // Interleaved sends the last bucket before the second-last (Note [Tail broadcast order]).
    if (schedule == ScheduleKind::ZeroInterleaved && order.size() >= 2) {
      std::swap(order[order.size() - 1], order[order.size() - 2]);
    }
    for (const Bucket* b : order) {
      out.push_back({parameter_collective, b->index, micro_batches - 1, param_dtype,
                     b->numel * dtype_size(param_dtype),
                     parameter_collective == CollectiveOp::Broadcast ? b->assigned_rank : -1});
    }
  }
  if (gathers_parameters()) {
    // Stage 3, every micro-batch: forward gathers every bucket in forward order (the last bucket
    // first), backward every bucket in backward order again; bucket 0, the last forward needs
    // and the first backward needs, stays resident between them, and the last bucket from one
    // micro-batch's backward to the next one's forward (Note [Parameter gathers]). So forward +
    // backward gathers + reduce-scatter move about 1.5x ddp's bytes per micro-batch.
    const auto n = static_cast<int>(plan.buckets.size());
    const auto gather = [&](int b, int micro) {
      const Bucket& bucket = plan.buckets[static_cast<std::size_t>(b)];
      out.push_back({CollectiveOp::AllGather, b, micro, param_dtype,
                     bucket.numel * dtype_size(param_dtype), -1});
    };
    // Backward gathers only the buckets it reads (Bucket::read_in_backward: not one holding
    // only the first layer); the last bucket stays for the next micro-batch if backward kept it.
    const bool last_stays = !reshard_after_forward || plan.buckets.back().read_in_backward;
    for (int micro = 0; micro < micro_batches; ++micro) {
      for (int b = micro > 0 && last_stays ? n - 2 : n - 1; b >= 0; --b) gather(b, micro);
      if (!reshard_after_forward) continue;
      for (int b = 1; b < n; ++b) {
        if (plan.buckets[static_cast<std::size_t>(b)].read_in_backward) gather(b, micro);
      }
    }
  }
  return out;
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
        const std::int64_t end = std::min(p.offset + p.numel, range.offset + range.numel);
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

BytesPerParameter bytes_per_parameter(const ModePlan& mode, int world) {
  const double share = mode.sharded_state ? 1.0 / world : 1.0;
  BytesPerParameter b;
  b.parameters = static_cast<double>(dtype_size(mode.param_dtype)) *
                 (mode.gathers_parameters() ? 1.0 / world : 1.0);
  b.gradients = mode.zero_stage >= 2 ? 4.0 / world
                                     : 4.0 + (mode.reduce_dtype == DType::BF16 ? 2.0 : 0.0);
  b.master = mode.master_bytes_per_element() * share;
  b.state = 4.0 * mode.state_floats_per_element * share;
  return b;
}

RankMemory rank_memory(const ModePlan& mode, const BucketPlan& plan, std::int64_t store_numel,
                       int rank) {
  RankMemory m;
  const std::int64_t gradient_bytes = 4 + (mode.reduce_dtype == DType::BF16 ? 2 : 0);
  m.parameters = store_numel * dtype_size(mode.param_dtype);
  if (mode.gathers_parameters()) {
    // The rank's shard of every bucket, and the gather buffers of the largest bucket.
    m.gather_buffers =
        mode.gather_buffers(plan) * plan.largest_bucket_numel() * dtype_size(mode.param_dtype);
    m.parameters = mode.stepped_numel(plan, rank) * dtype_size(mode.param_dtype) +
                   m.gather_buffers;
  }
  if (mode.zero_stage >= 2) {
    const auto buffers = std::min<std::int64_t>(kGradientPoolBuffers,
                                                static_cast<std::int64_t>(plan.buckets.size()));
    m.gradient_pool = buffers * plan.largest_bucket_numel() * gradient_bytes;
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
  // parameters + fp32 gradients [+ bf16 wire] + (master + state), the last over d when sharded.
  const BytesPerParameter one = bytes_per_parameter(mode, 1);
  if (mode.gathers_parameters()) {
    // Parameters, gradients (stage 2's shard), masters and state all over d; the gradient pool
    // and the gather buffers are a few buckets.
    return fmt::format("{:g}/d + {:g}/d + pool + gather buffers", one.parameters,
                       one.gradients + one.master + one.state);
  }
  if (mode.zero_stage >= 2) {
    // The gradient shard joins the sharded part; the pool is a few buckets, not per parameter.
    return fmt::format("{:g} + {:g}/d + pool", one.parameters,
                       one.gradients + one.master + one.state);
  }
  std::string out = fmt::format("{:g} + 4", one.parameters);
  if (one.gradients > 4.0) out += fmt::format(" + {:g}", one.gradients - 4.0);
  const double owned = one.master + one.state;
  if (owned == 0.0) return out;
  if (mode.sharded_state) return out + fmt::format(" + {:g}/d", owned);
  return out + fmt::format(" + {:g} = {:g}", owned, one.total());
}

}  // namespace zl
