// DataParallelStep: wiring of reducer, bucket primitives and step policy (see data_parallel_step.h).
#include "runtime/train/data_parallel_step.h"

#include <algorithm>

#include "base/errors.h"
#include "runtime/comm/device.h"

namespace zl {

DataParallelStep::DataParallelStep(const ModePlan& mode, DataParallelOptions options,
                                   const BucketPlan& plan, ParameterStore& store,
                                   ShardedOptimizer& optimizer, Communicator& reduce_comm,
                                   Communicator& broadcast_comm, ExecContext compute,
                                   Tracer* tracer)
    : options_(options),
      store_(store),
      optimizer_(optimizer),
      reduce_comm_(reduce_comm),
      broadcast_comm_(broadcast_comm),
      compute_(compute),
      wire_(store, mode.reduce_dtype),
      reducer_(plan, wire_, reduce_comm, mode.bucket_collective, compute, tracer),
      steps_(mode, plan, store, wire_, optimizer, broadcast_comm, compute, tracer) {
  ZL_CHECK(mode.param_dtype == store.param_dtype(), "a {} mode plan for a {} parameter store",
           dtype_name(mode.param_dtype), dtype_name(store.param_dtype()));
  ZL_CHECK(mode.can_clip || options.clip_grad_norm <= 0.0f,
           "{} cannot clip (rejected at config time)", mode.name());
  ZL_CHECK(options.step_check == StepCheck::EveryStep ||
               (options.clip_grad_norm <= 0.0f && options.on_nonfinite == OnNonfinite::Stop &&
                options.max_loss <= 0.0),
           "clipping, skip_step and max_loss need the verdict of every step");
  policy_ = make_step_policy(
      mode.schedule,
      PolicyContext{plan, reducer_, steps_, reduce_comm, options.clip_grad_norm,
                    options.on_nonfinite,
                    mode.sharded_state ? GradShares::Sharded : GradShares::Replicated,
                    options.step_check, options.max_loss, options.grad_accum});
  reducer_.set_issued_hook([this](int bucket) { policy_->on_collective_issued(bucket, scalars_); });
  grad_ready_hook_ = [this](int id) { reducer_.on_grad_ready(id); };
  param_use_hook_ = [this](int id) { steps_.wait_before_use(id); };
}

void DataParallelStep::set_observer(StepObserver* observer) {
  reducer_.set_observer(observer);
  steps_.set_observer(observer);
}

void DataParallelStep::broadcast_initial_parameters() {
  // In chunks: one MPI call counts elements in an int. In the store's dtype (bf16: the rounded
  // parameters; every rank's masters start from the same seeded fp32 values, which these are
  // master_to_bf16 of).
  constexpr std::int64_t kChunk = std::int64_t{1} << 30;
  const DType dtype = store_.param_dtype();
  auto* params = static_cast<char*>(store_.raw_data());
  Work last;
  for (std::int64_t offset = 0; offset < store_.total_numel(); offset += kChunk) {
    last = broadcast_comm_.broadcast(params + offset * dtype_size(dtype),
                                     std::min(kChunk, store_.total_numel() - offset), dtype, 0);
  }
  last.wait();  // stream order: every earlier chunk is done too
}

void DataParallelStep::begin_backward(std::int64_t micro_batch) {
  ZL_CHECK(micro_batch >= 0 && micro_batch < options_.grad_accum, "micro-batch {} of {}",
           micro_batch, options_.grad_accum);
  micro_batch_ = micro_batch;
  if (micro_batch != options_.grad_accum - 1) return;
  // Gradients hold the sum over ranks and micro-batches of per-micro-batch mean gradients:
  // averaging (docs/design.md invariant 6) is folded into the fused step as grad_scale.
  const float grad_scale = 1.0f / static_cast<float>(
                                      static_cast<std::int64_t>(reduce_comm_.size()) * options_.grad_accum);
  scalars_ = optimizer_.next_step(grad_scale);
  reducer_.arm();
}

StepVerdict DataParallelStep::finish_backward(const StepLossFn& step_loss) {
  reducer_.disarm();
  StepVerdict verdict = policy_->finish_backward(scalars_, step_loss);
  if (!verdict.finite && options_.on_nonfinite == OnNonfinite::SkipStep) {
    optimizer_.set_step_count(scalars_.t - 1);
  }
  return verdict;
}

void DataParallelStep::synchronize() {
  steps_.wait_all_before_use();
  reduce_comm_.synchronize();
  broadcast_comm_.synchronize();
  // CUDA: steps (ddp, none, after_backward) and forward waits live on the compute stream. It can
  // only be waiting for collectives that just completed, so this wait cannot hang.
  synchronize_stream(compute_);
}

}  // namespace zl
