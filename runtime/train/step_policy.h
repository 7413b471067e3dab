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
#pragma once

#include <memory>

#include "runtime/comm/communicator.h"
#include "runtime/train/bucket_steps.h"
#include "runtime/train/mode_plan.h"
#include "runtime/train/reducer.h"
#include "runtime/train/sharded_optimizer.h"

namespace zl {

// What a policy acts on (owned by the caller, outliving the policy).
struct PolicyContext {
  const BucketPlan& plan;
  Reducer& reducer;
  BucketSteps& steps;
  Communicator& reduce_comm;  // interleaved: where the step tasks run; the clip norm's all-reduce
  float clip_grad_norm = 0.0f;  // 0: no clipping
};

class StepPolicy {
 public:
  explicit StepPolicy(PolicyContext ctx) : ctx_(ctx) {}
  virtual ~StepPolicy() = default;

  // Main thread, right after bucket b's collective was issued, with this step's scalars.
  virtual void on_collective_issued(int bucket, const StepScalars& scalars) {
    (void)bucket, (void)scalars;
  }
  // After the last micro-batch's backward, every collective issued. On return the step is
  // issued; in ddp and zero/none it is also complete.
  virtual void finish_backward(const StepScalars& scalars) = 0;

 protected:
  // `scalars` with the clip coefficient applied (clipping on: every collective must be complete).
  StepScalars clipped(const StepScalars& scalars);
  PolicyContext ctx_;
};

std::unique_ptr<StepPolicy> make_step_policy(StepSchedule schedule, PolicyContext ctx);

}  // namespace zl
