// The scaling prediction of `zerolap plan --link-gbps` and the bench's ideal step: the collectives
// each mode issues per step, their time on a modelled link (Note [Link model],
// runtime/comm/link/simulated_link.h), and a step time predicted from a measured compute time.
//
// Note [Scaling model]: with compute time X per step (one rank's forward + backward + optimizer,
// which data parallelism with a fixed per-rank batch does not change) split by FLOPs into forward
// F and backward Bw (X = F + Bw, the optimizer counted in with forward), and each collective of
// the mode's program timed by the alpha-beta ring model on its communicator's span (comm_spans,
// collective_program.h: the shard group's, or the replicas' across the groups). A communicator's
// collectives occupy the rank's link of its span's tier t (inter: the network port, intra: the
// node's links; Note [Link occupancy]), so per tier:
//   C_t  the tier's collectives            L_t  those of the last bucket in the last micro-batch
//   R_t  its reductions (all-reduce, reduce or reduce-scatter), RL_t the last bucket's of them
//   Bc_t its broadcasts (or all-gathers)   FW_t stage 3's gathers in forward, but L_t's
// and C = sum_t C_t, L = sum_t L_t, RL = sum_t RL_t, Bc = sum_t Bc_t. The last bucket holds the
// first layers: final when backward ends, needed first by the next forward, so no schedule hides
// its chain, which crosses the tiers in sequence (hybrid: reduce-scatter in the group, then the
// all-reduce across the replicas, then the step, then the group's gathers): L is a sum. The rest
// of each tier runs on its own link beside the other tier's, pipelined bucket by bucket, so the
// slower tier bounds it. A tier's pipeline starts P_t into backward: when the first bucket it
// reduces is full (by the buckets' backward FLOPs, after the whole backward of the micro-batches
// before the one that first reduces on it: ddp and stage 1 reduce in the last only), and that
// bucket's reductions before it in the chain on the other tiers (hybrid: the replicas' all-reduce
// waits for the group's reduce-scatter) are done. Only stage 3's gathers in backward (G_t, but
// L_t's) need no gradient and start at once. Counted from backward's start, a tier's overlappable
// collectives end at E_t = P_t + C_t - L_t (ddp), ER_t = P_t + R_t - RL_t (none, after_backward)
// or EB_t = max(W_t, P_t + W_t - G_t) with W_t = C_t - FW_t - L_t (interleaved). Then
//   ddp                  X + max(0, E - Bw) + L,                 E = max_t E_t
//   zero/none,
//   zero/after_backward  X + max(0, ER - Bw) + RL + Bc,          ER = max_t ER_t
//   zero/interleaved     max(F, FW) + max(Bw, EB) + L,           FW = max_t FW_t, EB = max_t EB_t
// and the bench's ideal step (bench.h), a bound no schedule beats, max(X, max_t (C_t - L_t)) + L.
// With one tier (no link.node_ranks, or every span on one side of it) ddp's is the flat ring's
// X + max(0, P + C - C_last - Bw) + C_last and so on. With train.grad_accum > 1, stages 2 and 3
// count every micro-batch's collectives. The broadcasts of none and after_backward do not overlap
// the next forward: its first layer needs the last bucket's broadcast, which the broadcast stream
// runs last (after_backward overlaps them with optimizer steps only, which the model does not
// count). Interleaved pipelines reduce, step and publish per bucket during backward, but forward
// hides only stage 3's gathers: every other collective of a step starts in its backward, and the
// next forward's first layer waits for the last bucket's publish, behind all of them on the link
// (the tail order swaps only the last two). So a tier of reductions alone (the replicas'
// all-reduce) overlaps backward only, and a flat stage-1 step on a slow link is F + P + C, not C.
// Scaling efficiency = X / step. The "floor" is the step at X = 0: what the links alone take.
// Limits: no contention beyond one link per rank and tier (an inter-node ring's hops inside a
// node are not charged to the intra link), flat rings (no tree or hierarchical algorithms at large
// N), latency terms that grow as N, no compute slow-down from communication kernels or copies,
// buckets after the first never hold a pipeline up, forward's gathers fill no pipeline, the
// optimizer counted in forward (interleaved steps a bucket on the comm thread, in the chain),
// perfect overlap where the formula allows it. It is an estimate to read beside a measured bench,
// not a measurement.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "models/parameter_store.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/plan/mode_plan.h"

namespace zl {

// The ModePlan of every mode of all_modes() (runtime/config/mode.h), hybrid rows for the shard
// group parallel.shard_group when set, else link.node_ranks (a group per modelled node) when set,
// for `config`'s optimizer, precision, stage-3 options and train.grad_accum: what `zerolap plan`
// models. Their replicas are 1: at_ranks() sets them for a world.
std::vector<ModePlan> all_mode_plans(const Config& config);

// `mode` in a job of `ranks` ranks: its replicas across shard groups (ranks / G; 1 when flat).
// Whether its shard group divides `ranks`: fits_ranks().
bool fits_ranks(const ModePlan& mode, int ranks);
ModePlan at_ranks(ModePlan mode, int ranks);

// One tier's part of a mode's communication per step (seconds; Note [Scaling model]): the
// collectives of the communicators whose spans lie in that tier.
struct TierComm {
  double total_s = 0.0;         // C_t
  double last_s = 0.0;          // L_t
  double reduce_s = 0.0;        // R_t
  double reduce_last_s = 0.0;   // RL_t
  double broadcast_s = 0.0;     // Bc_t
  double forward_s = 0.0;       // FW_t: stage 3's gathers in forward, the last bucket's not
  double backward_gather_s = 0.0;  // G_t: stage 3's gathers in backward, the last bucket's not
  // The first bucket the tier reduces (-1: none), in which micro-batch, and the seconds of that
  // bucket's reductions before it in the chain on the other tiers: when its pipeline can start.
  int first_reduced_bucket = -1;
  int first_reduced_micro_batch = 0;
  double lead_s = 0.0;
  std::int64_t wire_bytes = 0;  // per rank per step (communicator.h's wire_bytes, the span's p)
};

// A mode's modelled communication per step: per tier, and the sums over the tiers.
struct ModeComm {
  double total_s = 0.0;        // C
  double last_s = 0.0;         // L (C_last with one tier)
  double reduce_s = 0.0;       // R
  double reduce_last_s = 0.0;  // RL
  double broadcast_s = 0.0;    // Bc
  std::int64_t wire_bytes = 0;  // per rank per step
  std::array<TierComm, 2> tiers{};  // indexed by LinkTier: Inter, Intra
  const TierComm& tier(LinkTier t) const { return tiers[static_cast<std::size_t>(t)]; }
};

// `seconds(entry, span)` times one entry of the mode's collective program on its communicator's
// span (the link model, or the bench's measured limits, which depend on its dtype too). `mode`'s
// replicas are the job's (at_ranks).
ModeComm mode_comm(const ModePlan& mode, const BucketPlan& plan, const CommSpans& spans,
                   const std::function<double(const ProgramEntry&, const LinkSpan&)>& seconds);

// The link model's ModeComm of `mode` in a job of `ranks` ranks (its replicas set by at_ranks;
// link.ranks, when set, wins: Note [Link model]). The shard group must divide `ranks`.
ModeComm modelled_mode_comm(const ModePlan& mode, const BucketPlan& plan, const LinkConfig& link,
                            int ranks);

// Backward's share of a step's GEMM FLOPs for a model of Linear layers (the first layer computes
// no input gradient): about 2/3.
double backward_flop_share(const ParameterStore& store);

// Where a step's compute lies, by GEMM FLOPs: backward's share of it, and each bucket's share of
// one micro-batch's backward (buckets fill in index order: Note [Bucket order]).
struct ComputeShares {
  double backward = 0.0;
  std::vector<double> bucket_backward;  // by bucket index; sums to 1
};
ComputeShares compute_shares(const ParameterStore& store, const BucketPlan& plan);

// The predicted step time (Note [Scaling model]) of `mode` for compute time `compute_s`.
double predicted_step_s(const ModePlan& mode, const ModeComm& comm, double compute_s,
                        const ComputeShares& shares);
// max(X, max_t (C_t - L_t)) + L: the lower bound of any schedule (Note [Ideal step]).
double ideal_step_s(const ModeComm& comm, double compute_s);

}  // namespace zl
