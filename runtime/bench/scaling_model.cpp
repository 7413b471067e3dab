// The scaling model (see scaling_model.h, Note [Scaling model]).
#include "runtime/bench/scaling_model.h"

#include <algorithm>

#include "runtime/comm/link/simulated_link.h"

namespace zl {

std::vector<ModePlan> all_mode_plans(const Config& config) {
  std::vector<ModePlan> out;
  for (const Mode& mode : all_modes()) {
    out.push_back(make_mode_plan(mode, config.parallel, config.optimizer, config.precision));
    out.back().micro_batches = static_cast<int>(config.train.grad_accum);
  }
  return out;
}

ModeComm modelled_mode_comm(const ModePlan& mode, const BucketPlan& plan, const LinkConfig& link,
                            int ranks) {
  // Today's modes issue every collective on flat communicators of all ranks.
  const LinkSpan span = flat_link_span(link, ranks);
  ModeComm out = mode_comm(mode, plan, [&](const ProgramEntry& c) {
    return modelled_seconds(link, c.op, c.bytes(), span);
  });
  for (const ProgramEntry& c : collective_program(mode, plan)) {
    out.wire_bytes += wire_bytes(c.op, c.bytes(), span.ranks);
  }
  return out;
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

double predicted_step_s(const ModePlan& mode, const ModeComm& c, double compute_s,
                        double backward_share) {
  const double backward = compute_s * backward_share;
  switch (mode.schedule) {
    case ScheduleKind::Ddp:
      return compute_s + std::max(0.0, c.total_s - c.last_s - backward) + c.last_s;
    case ScheduleKind::ZeroNone:
    case ScheduleKind::ZeroAfterBackward:
      // Reductions launched during backward overlap what is left of it; the last bucket's cannot.
      return compute_s + std::max(0.0, c.reduce_s - c.reduce_last_s - backward) + c.reduce_last_s +
             c.broadcast_s;
    case ScheduleKind::ZeroInterleaved:
      return std::max(compute_s, c.total_s - c.last_s) + c.last_s;
  }
  return compute_s + c.total_s;
}

}  // namespace zl
