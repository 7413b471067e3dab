// The scaling model (see scaling_model.h, Note [Scaling model]).
#include "runtime/bench/scaling_model.h"

#include <algorithm>

#include "base/errors.h"
#include "runtime/comm/link/simulated_link.h"

namespace zl {

std::vector<int> modelled_shard_groups(const Config& config) {
  if (config.parallel.shard_group > 0) return {config.parallel.shard_group};
  if (config.link.node_ranks > 0) return {config.link.node_ranks};
  return {};
}

std::vector<ModePlan> all_mode_plans(const Config& config) {
  std::vector<ModePlan> out;
  for (const Mode& mode : all_modes(modelled_shard_groups(config))) {
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

ModeComm modelled_mode_comm(const ModePlan& mode, const BucketPlan& plan, const LinkConfig& link,
                            int ranks) {
  const ModePlan at = at_ranks(mode, ranks);
  return mode_comm(at, plan, comm_spans(at, link, ranks),
                   [&](const ProgramEntry& c, const LinkSpan& span) {
                     return modelled_seconds(link, c.op, c.bytes(), span);
                   });
}

double backward_flop_share(const ParameterStore& store) {
  // Per sample: forward 2*in*out per Linear; backward 2*in*out for dW plus 2*in*out for dX,
  // except in the first Linear (models/model.cpp computes no gradient of the input).
  double forward = 0.0, backward = 0.0;
  bool first = true;
  for (const ParameterInfo& p : store.parameters()) {
    if (p.shape.size() != 2) continue;
    const double macs = static_cast<double>(p.shape[0] * p.shape[1]);
    forward += 2.0 * macs;
    backward += (first ? 2.0 : 4.0) * macs;
    first = false;
  }
  return forward + backward > 0.0 ? backward / (forward + backward) : 0.0;
}

namespace {

// E and ER of Note [Scaling model]: the slower tier's collectives (or reductions) that a schedule
// can overlap, each tier on its own link.
double overlappable_s(const ModeComm& c) {
  double e = 0.0;
  for (const TierComm& t : c.tiers) e = std::max(e, t.total_s - t.last_s);
  return e;
}
double overlappable_reduce_s(const ModeComm& c) {
  double e = 0.0;
  for (const TierComm& t : c.tiers) e = std::max(e, t.reduce_s - t.reduce_last_s);
  return e;
}

}  // namespace

double ideal_step_s(const ModeComm& c, double compute_s) {
  return std::max(compute_s, overlappable_s(c)) + c.last_s;
}

double predicted_step_s(const ModePlan& mode, const ModeComm& c, double compute_s,
                        double backward_share) {
  const double backward = compute_s * backward_share;
  switch (mode.schedule) {
    case ScheduleKind::Ddp:
      return compute_s + std::max(0.0, overlappable_s(c) - backward) + c.last_s;
    case ScheduleKind::ZeroNone:
    case ScheduleKind::ZeroAfterBackward:
      // Reductions launched during backward overlap what is left of it; the last bucket's cannot.
      return compute_s + std::max(0.0, overlappable_reduce_s(c) - backward) + c.reduce_last_s +
             c.broadcast_s;
    case ScheduleKind::ZeroInterleaved: {
      // Forward hides stage 3's forward gathers only; the rest of each tier, backward.
      double gathers = 0.0, rest = 0.0;
      for (const TierComm& t : c.tiers) {
        gathers = std::max(gathers, t.forward_s);
        rest = std::max(rest, t.total_s - t.forward_s - t.last_s);
      }
      return std::max(compute_s - backward, gathers) + std::max(backward, rest) + c.last_s;
    }
  }
  return compute_s + c.total_s;
}

}  // namespace zl
