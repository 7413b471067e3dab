// The scaling prediction of `zerolap plan --link-gbps` and the bench's ideal step: the collectives
// each mode issues per step, their time on a modelled link (Note [Link model],
// runtime/comm/link/simulated_link.h), and a step time predicted from a measured compute time.
//
// Note [Scaling model]: with compute time X per step (one rank's forward + backward + optimizer,
// which data parallelism with a fixed per-rank batch does not change) split by FLOPs into forward
// F and backward Bw (X = F + Bw, the optimizer counted in with forward), and the mode's
// collectives at N ranks timed by the alpha-beta ring model:
//   ddp                  X + max(0, C - C_last - Bw) + C_last
//   zero/none,
//   zero/after_backward  X + max(0, R - R_last - Bw) + R_last + Bc
//   zero/interleaved     max(X, C - C_last) + C_last   (= the bench's ideal step, bench.h)
// C = all of a step's collectives, R = its reductions (all-reduce, reduce or reduce-scatter), Bc =
// its broadcasts (or all-gathers), *_last = those of the last bucket in the last micro-batch (the
// first layers: final when backward ends, needed first by the next forward, so no schedule hides
// them); with train.grad_accum > 1, stages 2 and 3 count every micro-batch's collectives.
// Reductions overlap the part of backward left after their bucket is full. The broadcasts of
// none and after_backward do not overlap the next forward: its first layer needs the last
// bucket's broadcast, which the broadcast stream runs last (after_backward overlaps them with
// optimizer steps only, which the model does not count); interleaved's pipeline of reduce, step
// and broadcast overlaps all of compute but the last bucket's. Scaling efficiency = X / step.
// Limits: no
// contention between the two streams beyond what is summed here, no hierarchy (one flat ring of
// N ranks on one link type), no tree algorithms at large N, no compute slow-down from
// communication kernels, perfect overlap where the formula allows it. It is an estimate to read
// beside a measured bench, not a measurement.
#pragma once

#include <cstdint>
#include <vector>

#include "models/parameter_store.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/plan/mode_plan.h"

namespace zl {

// The ModePlan of every mode of all_modes() (runtime/config/mode.h), for `config`'s optimizer,
// precision, stage-3 options and train.grad_accum: what `zerolap plan` models.
std::vector<ModePlan> all_mode_plans(const Config& config);

// A mode's modelled communication per step (seconds).
struct ModeComm {
  double total_s = 0.0;        // C
  double last_s = 0.0;         // C_last
  double reduce_s = 0.0;       // R
  double reduce_last_s = 0.0;  // R_last
  double broadcast_s = 0.0;    // Bc
  std::int64_t wire_bytes = 0;  // per rank per step
};

// `seconds(collective)` times one entry of the mode's collective program (the link model, or the
// bench's measured limits, which depend on its dtype too).
template <typename Seconds>
ModeComm mode_comm(const ModePlan& mode, const BucketPlan& plan, Seconds&& seconds);

// The link model's ModeComm at `ranks` ranks (link.ranks, when set, wins: Note [Link model]).
ModeComm modelled_mode_comm(const ModePlan& mode, const BucketPlan& plan, const LinkConfig& link,
                            int ranks);

// Backward's share of a step's GEMM FLOPs for a model of Linear layers (the first layer computes
// no input gradient): about 2/3.
double backward_flop_share(const ParameterStore& store);

// The predicted step time (Note [Scaling model]) of `mode` for compute time `compute_s` of which
// `backward_share` is backward.
double predicted_step_s(const ModePlan& mode, const ModeComm& comm, double compute_s,
                        double backward_share);

// --- implementation of the template ------------------------------------------------------------

template <typename Seconds>
ModeComm mode_comm(const ModePlan& mode, const BucketPlan& plan, Seconds&& seconds) {
  ModeComm out;
  if (plan.buckets.empty()) return out;
  const int last_bucket = plan.buckets.back().index;
  for (const ProgramEntry& c : collective_program(mode, plan)) {
    const double s = seconds(c);
    const bool last = c.bucket == last_bucket && c.micro_batch == mode.micro_batches - 1;
    out.total_s += s;
    if (last) out.last_s += s;
    if (c.op == CollectiveOp::Broadcast || c.op == CollectiveOp::AllGather) {
      out.broadcast_s += s;
    } else {
      out.reduce_s += s;
      if (last) out.reduce_last_s += s;
    }
  }
  return out;
}

}  // namespace zl
