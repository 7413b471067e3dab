// The schedules: one small unit per ModePlan::schedule (ddp shares zero/none's) that decides
// *when* the shared primitives run - wait for a bucket's collective, step_bucket, publish, and the
// next forward's per-layer wait (bucket_ops.h). No schedule has step or broadcast logic of its
// own; the step that calls them is runtime/train/run/train_step.cpp. (`parallel.overlap` is the
// config's name for zero's schedule.)
//
//   ddp                 after backward: wait for every collective, every rank steps every bucket.
//   zero/none           after backward: wait for every collective, step owned buckets, broadcast
//                       all, wait for the broadcasts.
//   zero/after_backward after backward, for b in order: wait for b's collective, step if owned,
//                       broadcast; the next forward waits per layer for its bucket's broadcast.
//   zero/interleaved    b's step and broadcast run in a continuation on the reduce stream right
//                       after b's collective, while backward continues; the forward waits per
//                       layer.
//   zero/<overlap>/reduce_scatter_allgather  the overlap's schedule, unchanged: the collective is
//                       a reduce-scatter, step_bucket steps this rank's shard of every bucket and
//                       publish all-gathers (ModePlan::element_shards, shard_layout.h).
//
// Every schedule also returns the step's StepVerdict (step_verdict.h): checked before the first
// bucket steps where the schedule waits for every collective anyway (ddp, zero/none), or must
// (clipping, on_nonfinite = "skip_step"), and then a non-finite step steps nothing; otherwise
// (after_backward under "stop", interleaved) checked after the steps were issued
// (docs/design.md, "Divergence").
#pragma once

#include <functional>
#include <memory>

#include "runtime/comm/communicator.h"
#include "runtime/train/step/bucket_ops.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/reducer.h"
#include "runtime/train/step/rank_optimizer.h"
#include "runtime/train/step/step_context.h"
#include "runtime/train/step/step_options.h"
#include "runtime/train/step/step_verdict.h"

namespace zl {

// This rank's training loss of the step being finished (read when the step is checked).
using StepLossFn = std::function<double()>;

// What a schedule acts on; every reference outlives the schedule.
struct ScheduleParts {
  const StepContext& step;  // the bucket plan, the compute stream
  Reducer& reducer;  // interleaved: its reduced_on() stream runs the step tasks
  BucketOps& buckets;
  Communicator& every_rank;  // the verdict's all-reduce
  const StepOptions& options;
};

class Schedule {
 public:
  explicit Schedule(ScheduleParts parts) : parts_(parts) {}
  virtual ~Schedule() = default;

  // Main thread, right after bucket b's collective was started, with this step's scalars.
  virtual void after_collective_started(int /*bucket*/, const StepScalars& /*scalars*/) {}
  // After the final micro-batch's backward, every collective started. On return the step is
  // issued (in ddp and zero/none also complete), or, when the verdict came before the steps and
  // is not finite, nothing was stepped or broadcast.
  virtual StepVerdict after_backward(const StepScalars& scalars, const StepLossFn& step_loss) = 0;
  // The global gradient norm of the last checked step (sqrt(sum of squares) x grad_scale).
  double last_grad_norm() const { return last_grad_norm_; }

 protected:
  // The step's verdict, a collective on every_rank (with hybrid sharding the world's, not the
  // reduce communicator): every bucket's collective must be complete (CUDA: ordered before the
  // compute stream). Sets the step's gradient norm.
  StepVerdict check(const StepScalars& scalars, const StepLossFn& step_loss);
  // The verdict before any bucket steps: waits for every collective, then checks. A step found
  // non-finite is not stepped or published: its publishes leave this step's collective program.
  StepVerdict check_before_steps(const StepScalars& scalars, const StepLossFn& step_loss);
  // `scalars` with the clip coefficient applied (clipping on: `verdict` came before the steps).
  StepScalars clipped(const StepScalars& scalars, const StepVerdict& verdict) const;
  ScheduleParts parts_;
  double last_grad_norm_ = 0.0;
};

// The schedule of parts.step.mode.
std::unique_ptr<Schedule> make_schedule(ScheduleParts parts);

}  // namespace zl
