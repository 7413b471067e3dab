// ModePlan: the facts of one parallel mode, derived once from the config. Which collective a
// bucket's gradients take, whether the assigned rank broadcasts the stepped bucket, where the
// optimizer state lives and how much of it, when the step runs. The schedules, the optimizer,
// `zerolap plan`, the bench and checkpoints read these facts here instead of re-deriving them
// from ParallelConfig (docs/design.md "Modes" has the table).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/train/bucket_plan.h"

namespace zl {

// When a bucket's optimizer step runs relative to backward (one schedule each, schedule.h; the
// config names zero's schedule parallel.overlap).
enum class ScheduleKind {
  Ddp,                // after backward, every rank steps every bucket
  ZeroNone,           // after backward: owned steps, every broadcast, wait for them
  ZeroAfterBackward,  // after backward, per bucket in order: wait, step if owned, broadcast
  ZeroInterleaved,    // in the completion callback of the bucket's collective, during backward
};

// One collective a step issues for a bucket, in issue order.
struct PlannedCollective {
  CollectiveOp op = CollectiveOp::AllReduce;
  int bucket = 0;
  DType dtype = DType::F32;  // gradients: reduce_dtype; broadcasts: param_dtype
  std::int64_t bytes = 0;
  int root = -1;  // reduce / broadcast: the bucket's assigned rank; -1 for all-reduce
};

struct ModePlan {
  ParallelMode mode = ParallelMode::Ddp;
  Overlap overlap = Overlap::None;  // None in ddp, whatever the config says
  CollectiveKind collective = CollectiveKind::AllreduceBroadcast;  // likewise
  ScheduleKind schedule = ScheduleKind::Ddp;
  // The gradients' collective: AllReduce, or Reduce to the bucket's assigned rank.
  CollectiveOp bucket_collective = CollectiveOp::AllReduce;
  // zero: the assigned rank broadcasts the bucket's new parameters after stepping it.
  bool broadcast_after_step = false;
  // zero: optimizer state and the step of a bucket live on its assigned rank only; ddp: on every
  // rank (docs/design.md invariant 5).
  bool sharded_state = false;
  // after_backward and interleaved: the next forward waits per bucket for its broadcast, so the
  // broadcasts overlap the forward's first layers.
  bool forward_waits_per_layer = false;
  // A clip norm needs every bucket reduced before any step; interleaved steps earlier.
  bool can_clip = true;
  int state_floats_per_element = 0;  // Adam/AdamW 2, SGD with momentum 1, plain SGD 0
  // Precision (docs/design.md "Precision"). The parameters forward/backward read and the
  // broadcast sends are param_dtype; gradients accumulate in fp32 and travel as reduce_dtype
  // (bf16: cast into a reduce buffer of 2 bytes per element first); with bf16 parameters the rank
  // that steps a bucket keeps fp32 masters, or their int16 remainders.
  DType param_dtype = DType::F32;
  DType reduce_dtype = DType::F32;
  MasterWeights master_weights = MasterWeights::Fp32;

  // "ddp" or "zero/<overlap>/<collective>", as the bench and logs name modes.
  std::string name() const;
  // Whether `rank` holds the optimizer state of bucket `b` and steps it.
  bool steps_on(const Bucket& b, int rank) const {
    return !sharded_state || b.assigned_rank == rank;
  }
  // Optimizer-state bytes `rank` allocates: what `zerolap plan` prints and
  // ShardedOptimizer::state_bytes() must report.
  std::int64_t state_bytes(const BucketPlan& plan, int rank) const;
  // Master-weight bytes `rank` allocates (bf16 only: 4 or 2 per stepped element; fp32: 0, the
  // parameters are the masters).
  std::int64_t master_bytes(const BucketPlan& plan, int rank) const;
  int master_bytes_per_element() const;
  // Every collective of one step, in issue order per communicator (gradients on the reduce
  // communicator, then the broadcasts on the broadcast communicator).
  std::vector<PlannedCollective> collectives(const BucketPlan& plan) const;
};

ModePlan make_mode_plan(const ParallelConfig& parallel, const OptimizerConfig& optimizer,
                        const PrecisionConfig& precision = PrecisionConfig{});

// Bytes per parameter element on one rank of `world` ranks for a mode, split as `zerolap plan`
// prints them; sharded parts count 1/world (an even split; the bucket plan's real split is what
// ModePlan::state_bytes / master_bytes count).
struct BytesPerParameter {
  double parameters = 0;  // the flat parameter buffer: 4 (fp32) or 2 (bf16)
  double gradients = 0;   // the fp32 gradient buffer, plus the bf16 reduce buffer with reduce_dtype bf16
  double master = 0;      // bf16: fp32 masters 4 or remainders 2, per stepping rank
  double state = 0;       // optimizer state: Adam 8, SGD momentum 4
  double total() const { return parameters + gradients + master + state; }
};
BytesPerParameter bytes_per_parameter(const ModePlan& mode, int world);

// What one rank allocates for parameters, gradients, masters and optimizer state, in bytes, from
// the bucket plan (`store_numel`: the parameter store's elements, padding included). The trainer's
// allocations must equal these (tested); `zerolap plan` prints them.
struct RankMemory {
  std::int64_t parameters = 0, gradients = 0, master = 0, state = 0;
  std::int64_t total() const { return parameters + gradients + master + state; }
};
RankMemory rank_memory(const ModePlan& mode, const BucketPlan& plan, std::int64_t store_numel,
                       int rank);
// The same as a formula in d (the world size), e.g. "2 + 4 + 12/d" for bf16 + fp32 master +
// Adam under zero with fp32 gradients.
std::string bytes_per_parameter_formula(const ModePlan& mode);

// The precision as `zerolap plan` and the bench name it: "fp32", "tf32", "bf16 + fp32 master" or
// "bf16 + remainders" (reduce_dtype is named beside it).
std::string precision_label(const PrecisionConfig& precision);

// Optimizer-state floats per parameter element: Adam/AdamW 2 (exp_avg, exp_avg_sq), SGD 1 with
// momentum, 0 without.
int state_floats_per_element(const OptimizerConfig& optimizer);

}  // namespace zl
