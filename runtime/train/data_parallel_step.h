// DataParallelStep: one rank's side of a data-parallel optimizer step, assembled from its parts -
// the Reducer (grad-ready hooks -> bucket collectives), BucketSteps (step, broadcast, per-layer
// wait) and the mode's StepPolicy (when those run). The Trainer drives it: begin_backward before
// each micro-batch's backward, the two hooks during forward and backward, finish_backward after
// the last one, synchronize before anything reads parameters or optimizer state.
#pragma once

#include <cstdint>
#include <memory>

#include "models/parameter_store.h"
#include "models/tape.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/bucket_steps.h"
#include "runtime/train/gradient_wire.h"
#include "runtime/train/mode_plan.h"
#include "runtime/train/reducer.h"
#include "runtime/train/sharded_optimizer.h"
#include "runtime/train/step_observer.h"
#include "runtime/train/step_policy.h"

namespace zl {

class Tracer;

struct DataParallelOptions {
  float clip_grad_norm = 0.0f;  // 0: off
  std::int64_t grad_accum = 1;  // micro-batches per step
  OnNonfinite on_nonfinite = OnNonfinite::Stop;
  StepCheck step_check = StepCheck::EveryStep;
  double max_loss = 0.0;  // train.max_loss
};

class DataParallelStep {
 public:
  // Every reference must outlive this object.
  DataParallelStep(const ModePlan& mode, DataParallelOptions options, const BucketPlan& plan,
                   ParameterStore& store, ShardedOptimizer& optimizer, Communicator& reduce_comm,
                   Communicator& broadcast_comm, ExecContext compute, Tracer* tracer);

  // Rank 0's initial parameters to every rank (blocking), before the first step.
  void broadcast_initial_parameters();

  // Before each micro-batch's backward (0 .. grad_accum-1). Collectives are launched only in the
  // last one (grad_accum > 1 accumulates locally first), which also fixes the step's scalars.
  void begin_backward(std::int64_t micro_batch);
  // Gradient accumulation mode for this micro-batch's backward (= on the first, += after).
  Accumulate accumulate_mode() const {
    return micro_batch_ == 0 ? Accumulate::Overwrite : Accumulate::Add;
  }
  // The hooks handed to backward and forward.
  const GradReadyHook& grad_ready_hook() const { return grad_ready_hook_; }
  const ParamUseHook& param_use_hook() const { return param_use_hook_; }

  // After the last micro-batch's backward: the mode's policy, and the step's verdict, the same on
  // every rank (`step_loss` reads this rank's loss of the step). On return the step is issued (in
  // ddp and zero/none also complete). A verdict that is not finite and came before the steps left
  // every parameter as it was; under on_nonfinite = "skip_step" the optimizer's step count is
  // also taken back, so the skipped step leaves no trace in t or the LR schedule
  // (docs/design.md, "Divergence").
  StepVerdict finish_backward(const StepLossFn& step_loss);

  // Waits until every collective, step and broadcast issued so far completed.
  void synchronize();

  // Tests: events of each step in the order they happen (null: none).
  void set_observer(StepObserver* observer);

  double last_grad_norm() const { return steps_.last_grad_norm(); }
  // Bytes of the bf16 gradient wire buffer (reduce_dtype = "bf16"; 0 for fp32): with the store's
  // fp32 gradients, what RankMemory::gradients counts.
  std::int64_t wire_bytes() const { return wire_.bytes(); }

 private:
  DataParallelOptions options_;
  ParameterStore& store_;
  ShardedOptimizer& optimizer_;
  Communicator& reduce_comm_;
  Communicator& broadcast_comm_;
  ExecContext compute_;
  GradientWire wire_;  // before the reducer and the steps, which use it
  Reducer reducer_;
  BucketSteps steps_;
  std::unique_ptr<StepPolicy> policy_;
  GradReadyHook grad_ready_hook_;
  ParamUseHook param_use_hook_;

  std::int64_t micro_batch_ = 0;  // index within the current step
  StepScalars scalars_;           // fixed at the last micro-batch's begin_backward
};

}  // namespace zl
