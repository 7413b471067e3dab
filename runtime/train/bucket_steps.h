// BucketSteps: the primitives every step policy is made of, written once. step_bucket(b) runs the
// fused optimizer update of a bucket on the rank that steps it (ModePlan::steps_on),
// broadcast_bucket(b) sends a stepped bucket from its assigned rank, and wait_before_use(param)
// is the per-layer wait of the next forward for its bucket's broadcast. Also the clip coefficient
// (a global norm over the reduced gradients). The policies (step_policy.h) only decide *when*.
//
// Threads: step_bucket and broadcast_bucket run on the main thread, or in interleaved mode on the
// reduce communicator's stream (one callback per bucket, in bucket order). The per-layer wait
// state (expect_broadcast, wait_before_use) is the main thread's alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/exec_context.h"
#include "kernels/elementwise.h"
#include "models/parameter_store.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/gradient_wire.h"
#include "runtime/train/mode_plan.h"
#include "runtime/train/sharded_optimizer.h"
#include "runtime/train/step_observer.h"

namespace zl {

class Tracer;

class BucketSteps {
 public:
  // `wire`: where the buckets' reduced gradients are (the step and the gradient norm read them).
  BucketSteps(const ModePlan& mode, const BucketPlan& plan, ParameterStore& store,
              const GradientWire& wire, ShardedOptimizer& optimizer, Communicator& broadcast_comm,
              ExecContext compute, Tracer* tracer);

  void set_observer(StepObserver* observer) { observer_ = observer; }
  const ExecContext& compute() const { return compute_; }

  // The fused update of bucket b on `exec` when this rank steps b; nothing otherwise.
  // `trace_thread` names the thread in the trace ("main" or the comm stream).
  void step_bucket(int bucket, const StepScalars& scalars, const ExecContext& exec,
                   const std::string& trace_thread);
  // Issues bucket b's broadcast from its assigned rank (element shards: its all-gather of every
  // rank's shard) on the broadcast communicator, after the work issued so far on
  // `issuing_stream` (null: the compute stream; communicator.h). It sends the store's parameters
  // in their dtype: 2 bytes per element for bf16, which the bf16 step wrote there directly.
  void broadcast_bucket(int bucket, const ExecContext* issuing_stream = nullptr);
  // Blocks until every bucket's broadcast completed.
  void wait_broadcasts();

  // Interleaved: the Work of the reduce-stream task that steps and broadcasts b. The per-layer
  // wait orders itself after it before reading b's broadcast Work, which that task publishes.
  void set_step_work(int bucket, Work work) {
    step_work_[static_cast<std::size_t>(bucket)] = std::move(work);
  }
  // Main thread: the next forward must wait for b's broadcast before reading b's parameters.
  void expect_broadcast(int bucket) { awaiting_[static_cast<std::size_t>(bucket)] = 1; }
  // The per-layer wait, before the forward reads parameter `param_id` (the param-use hook).
  void wait_before_use(int param_id);
  // Every wait still pending (before eval, checkpoints, reading parameters).
  void wait_all_before_use();

  // This rank's share of the sum of squares of the reduced gradient: the elements it steps (every
  // bucket in ddp; in zero only the assigned rank is sure to hold a bucket's reduced gradient;
  // with element shards the rank's shard of each bucket, zero padding adding nothing),
  // added in bucket order, one read-back on CUDA. Every bucket's collective must have completed
  // (CUDA: be ordered before the compute stream). The step's check and the clip norm use it.
  // bf16 wire gradients (reduce_dtype = "bf16") are summed in double, as fp32 ones.
  double local_grad_sum_sq(int rank);
  // torch.nn.utils.clip_grad_norm_'s coefficient for max norm `max_norm` (> 0) from the global
  // sum of squares of the reduced gradients scaled by `grad_scale` (the average over ranks and
  // micro-batches).
  static float clip_coefficient(float max_norm, double grad_sum_sq, float grad_scale);
  // The global gradient norm of the last checked step (sqrt(sum of squares) x grad_scale).
  void set_last_grad_norm(double norm) { last_grad_norm_ = norm; }
  double last_grad_norm() const { return last_grad_norm_; }

 private:
  // local_grad_sum_sq over the wire's gradients as T (float or Bf16).
  template <class T>
  double sum_of_stepped_squares(std::vector<ReadSpan<T>>& spans, int rank);

  const ModePlan& mode_;
  const BucketPlan& plan_;
  ParameterStore& store_;
  const GradientWire& wire_;
  ShardedOptimizer& optimizer_;
  Communicator& broadcast_comm_;
  ExecContext compute_;
  Tracer* tracer_;
  StepObserver* observer_ = nullptr;

  std::vector<Work> step_work_;       // interleaved: the task that steps and broadcasts
  std::vector<Work> broadcast_work_;  // written where broadcast_bucket runs
  std::vector<char> awaiting_;        // main thread: forward must wait for this bucket
  double last_grad_norm_ = 0.0;
  // The norm's buckets, reused every step (one of the two, by the wire's dtype).
  std::vector<ReadSpan<float>> norm_spans_f32_;
  std::vector<ReadSpan<Bf16>> norm_spans_bf16_;
};

}  // namespace zl
