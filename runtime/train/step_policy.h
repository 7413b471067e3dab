// The step policies: one small policy per schedule (ModePlan::schedule) that decides *when* the
// shared primitives run - wait for a bucket's collective, step_bucket, broadcast_bucket, and the
// next forward's per-layer wait (bucket_steps.h). No policy has step or broadcast logic of its own.
//
//   ddp                 after backward: wait for every collective, every rank steps every bucket.
//   zero/none           after backward: wait for every collective, step owned buckets, broadcast
//                       all, wait for the broadcasts.
//   zero/after_backward after backward, for b in order: wait for b's collective, step if owned,
//                       broadcast; the next forward waits per layer for its bucket's broadcast.
//   zero/interleaved    b's step and broadcast run in a task on the reduce stream right after b's
//                       collective, while backward continues; the forward waits per layer.
//
// Every policy also returns the step's StepVerdict (step_verdict.h): checked before the first
// bucket steps where the schedule waits for every collective anyway (ddp, zero/none), or must
// (clipping, on_nonfinite = "skip_step"), and then a non-finite step steps nothing; otherwise
// (after_backward under "stop", interleaved) checked after the steps were issued
// (docs/design.md, "Divergence").
#pragma once

#include <functional>
#include <memory>

#include "runtime/comm/communicator.h"
#include "runtime/train/bucket_steps.h"
#include "runtime/train/mode_plan.h"
#include "runtime/train/reducer.h"
#include "runtime/train/sharded_optimizer.h"
#include "runtime/train/step_verdict.h"

namespace zl {

// What a policy acts on (owned by the caller, outliving the policy).
struct PolicyContext {
  const BucketPlan& plan;
  Reducer& reducer;
  BucketSteps& steps;
  Communicator& reduce_comm;  // interleaved: where the step tasks run; the clip norm's all-reduce
  float clip_grad_norm = 0.0f;  // 0: no clipping
  OnNonfinite on_nonfinite = OnNonfinite::Stop;
  GradShares grad_shares = GradShares::Replicated;
  StepCheck step_check = StepCheck::EveryStep;  // EveryLogWindow: check() answers finite
  double max_loss = 0.0;         // train.max_loss (0: none)
  std::int64_t grad_accum = 1;   // the step loss is a sum over this many micro-batches
};

// This rank's training loss of the step being finished (read when the step is checked).
using StepLossFn = std::function<double()>;

class StepPolicy {
 public:
  explicit StepPolicy(PolicyContext ctx) : ctx_(ctx) {}
  virtual ~StepPolicy() = default;

  // Main thread, right after bucket b's collective was issued, with this step's scalars.
  virtual void on_collective_issued(int bucket, const StepScalars& scalars) {
    (void)bucket, (void)scalars;
  }
  // After the last micro-batch's backward, every collective issued. On return the step is
  // issued (in ddp and zero/none also complete), or, when the verdict came before the steps and
  // is not finite, nothing was stepped or broadcast.
  virtual StepVerdict finish_backward(const StepScalars& scalars, const StepLossFn& step_loss) = 0;

 protected:
  // The step's verdict, a collective on the reduce communicator: every bucket's collective must
  // be complete (CUDA: ordered before the compute stream). Sets the step's gradient norm.
  StepVerdict check(const StepScalars& scalars, const StepLossFn& step_loss);
  // `scalars` with the clip coefficient applied (clipping on: `verdict` came before the steps).
  StepScalars clipped(const StepScalars& scalars, const StepVerdict& verdict) const;
  PolicyContext ctx_;
};

std::unique_ptr<StepPolicy> make_step_policy(StepSchedule schedule, PolicyContext ctx);

}  // namespace zl
