// The scaling model (see scaling_model.h, Note [Scaling model]).
#include "runtime/bench/scaling_model.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "base/errors.h"
#include "runtime/comm/link/simulated_link.h"

namespace zl {

std::vector<ModePlan> all_mode_plans(const Config& config) {
  const int group = config.parallel.shard_group > 0 ? config.parallel.shard_group
                                                    : config.link.node_ranks;  // 0: none
  std::vector<ModePlan> out;
  for (const Mode& mode : all_modes(group > 0 ? std::vector<int>{group} : std::vector<int>{})) {
    out.push_back(make_mode_plan(mode, config.parallel, config.optimizer, config.precision));
    out.back().micro_batches = static_cast<int>(config.train.grad_accum);
  }
  return out;
}

bool fits_ranks(const ModePlan& mode, int ranks) {
  return mode.mode.shard_group == 0 || ranks % mode.mode.shard_group == 0;
}

ModePlan at_ranks(ModePlan mode, int ranks) {
  ZL_CHECK(fits_ranks(mode, ranks), "{}: shard groups of {} do not divide {} ranks", mode.name(),
           mode.mode.shard_group, ranks);
  mode.replicas = mode.mode.replicas(ranks);
  return mode;
}

ModeComm mode_comm(const ModePlan& mode, const BucketPlan& plan, const CommSpans& spans,
                   const std::function<double(const ProgramEntry&, const LinkSpan&)>& seconds) {
  ModeComm out;
  if (plan.buckets.empty()) return out;
  const int last_bucket = plan.buckets.back().index;
  const std::vector<ProgramEntry> program = collective_program(mode, plan);
  const std::vector<bool> forward = forward_entries(mode, plan);
  std::vector<double> entry_s(program.size());
  std::vector<std::size_t> tier_of(program.size());
  auto reduction = [](const ProgramEntry& c) {
    return c.op != CollectiveOp::Broadcast && c.op != CollectiveOp::AllGather;
  };
  for (std::size_t i = 0; i < program.size(); ++i) {
    const ProgramEntry& c = program[i];
    const LinkSpan& span = spans.of(c.comm);
    const double s = entry_s[i] = seconds(c, span);
    tier_of[i] = static_cast<std::size_t>(span.tier);
    const bool last = c.bucket == last_bucket && c.micro_batch == mode.micro_batches - 1;
    TierComm& t = out.tiers[tier_of[i]];
    t.total_s += s;
    t.wire_bytes += wire_bytes(c.op, c.bytes(), span.ranks);
    if (last) t.last_s += s;
    if (forward[i] && !last) t.forward_s += s;
    if (!reduction(c)) {
      t.broadcast_s += s;
      // Stage 3 publishes nothing after a step: its gathers in backward wait for no gradient.
      if (mode.gathers_parameters() && !forward[i] && !last) t.backward_gather_s += s;
    } else {
      t.reduce_s += s;
      if (last) t.reduce_last_s += s;
      if (t.first_reduced_bucket < 0 ||
          std::pair(c.micro_batch, c.bucket) <
              std::pair(t.first_reduced_micro_batch, t.first_reduced_bucket)) {
        t.first_reduced_bucket = c.bucket;
        t.first_reduced_micro_batch = c.micro_batch;
      }
    }
  }
  // A bucket's chain runs in program order (the group's reduce-scatter, then the replicas'
  // all-reduce in its continuation).
  for (std::size_t tier = 0; tier < out.tiers.size(); ++tier) {
    TierComm& t = out.tiers[tier];
    for (std::size_t i = 0; i < program.size(); ++i) {
      const ProgramEntry& c = program[i];
      if (!reduction(c) || c.bucket != t.first_reduced_bucket ||
          c.micro_batch != t.first_reduced_micro_batch) {
        continue;
      }
      if (tier_of[i] == tier) break;
      t.lead_s += entry_s[i];
    }
  }
  for (const TierComm& t : out.tiers) {
    out.total_s += t.total_s;
    out.last_s += t.last_s;
    out.reduce_s += t.reduce_s;
    out.reduce_last_s += t.reduce_last_s;
    out.broadcast_s += t.broadcast_s;
    out.wire_bytes += t.wire_bytes;
  }
  return out;
}

ModeComm modelled_mode_comm(const ModePlan& mode, const BucketPlan& plan, const LinkConfig& link,
                            int ranks) {
  const ModePlan at = at_ranks(mode, ranks);
  return mode_comm(at, plan, comm_spans(at, link, ranks),
                   [&](const ProgramEntry& c, const LinkSpan& span) {
                     return modelled_seconds(link, c.op, c.bytes(), span);
                   });
}

namespace {

// Per parameter (by id), per sample: its GEMM's forward and backward FLOPs. Forward 2*in*out per
// Linear; backward 2*in*out for dW plus 2*in*out for dX, except in the first Linear
// (models/model.cpp computes no gradient of the input). Biases and norms count as nothing.
struct ParameterFlops {
  std::vector<double> forward, backward;
};
ParameterFlops parameter_flops(const ParameterStore& store) {
  ParameterFlops out;
  bool first = true;
  for (const ParameterInfo& p : store.parameters()) {
    const bool gemm = p.shape.size() == 2;
    const double macs = gemm ? static_cast<double>(p.shape[0] * p.shape[1]) : 0.0;
    out.forward.push_back(2.0 * macs);
    out.backward.push_back((first ? 2.0 : 4.0) * macs);
    first = first && !gemm;
  }
  return out;
}

double sum(const std::vector<double>& x) { return std::accumulate(x.begin(), x.end(), 0.0); }

// P_t of Note [Scaling model]: how far into backward tier t's pipeline can start. Its first
// reduction waits until its bucket is full (that micro-batch's backward up to the bucket, after
// the earlier micro-batches' whole backward) and that bucket's reductions before it in the chain,
// on the other tiers, are done.
double pipeline_start_s(const TierComm& t, const ComputeShares& shares, double backward_s,
                        int micro_batches) {
  if (t.first_reduced_bucket < 0) return 0.0;
  double filled = 0.0;
  const int buckets = static_cast<int>(shares.bucket_backward.size());
  for (int b = 0; b <= t.first_reduced_bucket && b < buckets; ++b) {
    filled += shares.bucket_backward[static_cast<std::size_t>(b)];
  }
  return backward_s * (t.first_reduced_micro_batch + filled) / std::max(micro_batches, 1) +
         t.lead_s;
}

}  // namespace

double backward_flop_share(const ParameterStore& store) {
  return compute_shares(store, BucketPlan{}).backward;
}

ComputeShares compute_shares(const ParameterStore& store, const BucketPlan& plan) {
  const ParameterFlops f = parameter_flops(store);
  const double backward = sum(f.backward), all = sum(f.forward) + backward;
  ComputeShares out;
  out.backward = all > 0.0 ? backward / all : 0.0;
  out.bucket_backward.assign(plan.buckets.size(), 0.0);
  for (const Bucket& b : plan.buckets) {
    for (const int id : b.param_ids) {
      out.bucket_backward[static_cast<std::size_t>(b.index)] +=
          backward > 0.0 ? f.backward.at(static_cast<std::size_t>(id)) / backward : 0.0;
    }
  }
  return out;
}

double ideal_step_s(const ModeComm& c, double compute_s) {
  // max_t (C_t - L_t): the slower tier's collectives that some schedule could overlap with
  // compute, each tier on its own link.
  double overlappable = 0.0;
  for (const TierComm& t : c.tiers) overlappable = std::max(overlappable, t.total_s - t.last_s);
  return std::max(compute_s, overlappable) + c.last_s;
}

double predicted_step_s(const ModePlan& mode, const ModeComm& c, double compute_s,
                        const ComputeShares& shares) {
  const double backward = compute_s * shares.backward;
  // Each tier's pipelined collectives end at most this far into backward: they start at P_t (but
  // stage 3's gathers in backward, which need no gradient, start at once) and run back to back.
  double tiers_end = 0.0, forward_gathers = 0.0;
  for (const TierComm& t : c.tiers) {
    const double start = pipeline_start_s(t, shares, backward, mode.micro_batches);
    double busy = 0.0;
    switch (mode.schedule) {
      case ScheduleKind::Ddp:
        busy = start + t.total_s - t.last_s;
        break;
      case ScheduleKind::ZeroNone:
      case ScheduleKind::ZeroAfterBackward:
        busy = start + t.reduce_s - t.reduce_last_s;
        break;
      case ScheduleKind::ZeroInterleaved: {
        const double rest = t.total_s - t.forward_s - t.last_s;
        busy = std::max(rest, start + rest - t.backward_gather_s);
        forward_gathers = std::max(forward_gathers, t.forward_s);
        break;
      }
    }
    tiers_end = std::max(tiers_end, busy);
  }
  switch (mode.schedule) {
    case ScheduleKind::Ddp:
      return compute_s + std::max(0.0, tiers_end - backward) + c.last_s;
    case ScheduleKind::ZeroNone:
    case ScheduleKind::ZeroAfterBackward:
      // The last bucket's reductions cannot overlap, nor the broadcasts the next forward.
      return compute_s + std::max(0.0, tiers_end - backward) + c.reduce_last_s + c.broadcast_s;
    case ScheduleKind::ZeroInterleaved:
      // Forward hides stage 3's forward gathers only; the rest of each tier, backward.
      return std::max(compute_s - backward, forward_gathers) + std::max(backward, tiers_end) +
             c.last_s;
  }
  return compute_s + c.total_s;
}

}  // namespace zl
