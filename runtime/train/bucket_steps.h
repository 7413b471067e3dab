// BucketSteps: the primitives every schedule is made of, written once. step_bucket(b) runs the
// fused optimizer update of a bucket on the rank that steps it (ModePlan::steps_on),
// start_broadcast(b) sends a stepped bucket from its assigned rank, and wait_for_parameters(param)
// is the per-layer wait of the next forward for its bucket's broadcast. Also the clip coefficient
// (a global norm over the reduced gradients). The schedules (schedule.h) only decide *when*.
//
// Threads: step_bucket and start_broadcast run on the main thread, or in interleaved mode on the
// reduce communicator's stream (one continuation per bucket, in bucket order). The per-layer wait
// state (forward_waits_for, wait_for_parameters) is the main thread's alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/exec_context.h"
#include "kernels/elementwise.h"
#include "models/parameter_store.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/reduce_buffer.h"
#include "runtime/train/mode_plan.h"
#include "runtime/train/sharded_optimizer.h"
#include "runtime/train/step_observer.h"

namespace zl {

class Tracer;

// Where a bucket's step runs: on the main thread's compute stream, or inside a continuation on
// the reduce communicator's stream (interleaved). It names the span in the trace and timeline.
enum class StepStream { Compute, Reduce };

// Whether the next forward must wait for a bucket's broadcast before reading its parameters.
enum class NextForward : unsigned char { ReadsAtOnce, WaitsForBroadcast };

class BucketSteps {
 public:
  // `gradients`: where the buckets' reduced gradients are (the step and the gradient norm read
  // them); `reduce_stream_name`: the reduce communicator's, for steps on StepStream::Reduce.
  BucketSteps(const ModePlan& mode, const BucketPlan& plan, ParameterStore& store,
              const ReduceBuffer& gradients, ShardedOptimizer& optimizer,
              Communicator& broadcast_comm, ExecContext compute, Tracer* tracer,
              std::string reduce_stream_name);

  void set_observer(StepObserver* observer) { observer_ = observer; }
  const ExecContext& compute() const { return compute_; }

  // The fused update of bucket b on `exec` (the compute stream, or the reduce stream a
  // continuation was handed) when this rank steps b; nothing otherwise.
  void step_bucket(int bucket, const StepScalars& scalars, const ExecContext& exec,
                   StepStream stream);
  // Starts bucket b's broadcast from its assigned rank on the broadcast communicator, after the
  // work issued so far on `issuing_stream` (null: the compute stream; communicator.h). It sends
  // the store's parameters in their dtype: 2 bytes per element for bf16, which the bf16 step
  // wrote there directly.
  void start_broadcast(int bucket, const ExecContext* issuing_stream = nullptr);
  // Blocks until every bucket's broadcast completed.
  void wait_broadcasts();

  // Interleaved: the Work of the reduce-stream continuation that steps and broadcasts b. The
  // per-layer wait orders itself after it before reading b's broadcast Work, which that
  // continuation publishes.
  void set_interleaved_task(int bucket, Work task) {
    interleaved_task_[static_cast<std::size_t>(bucket)] = std::move(task);
  }
  // Main thread: the next forward must wait for b's broadcast before reading b's parameters.
  void forward_waits_for(int bucket) {
    next_forward_[static_cast<std::size_t>(bucket)] = NextForward::WaitsForBroadcast;
  }
  // The per-layer wait, before the forward reads parameter `param_id` (the param-use hook).
  void wait_for_parameters(int param_id);
  // Every wait still pending (before eval, checkpoints, reading parameters).
  void wait_for_all_parameters();

  // This rank's share of the sum of squares of the reduced gradient: the buckets it steps (every
  // bucket in ddp; in zero only the assigned rank is sure to hold a bucket's reduced gradient),
  // added in bucket order, one read-back on CUDA. Every bucket's collective must have completed
  // (CUDA: be ordered before the compute stream). The step's check and the clip norm use it.
  // bf16 reduced gradients (reduce_dtype = "bf16") are summed in double, as fp32 ones.
  double local_grad_sum_sq(int rank);
  // torch.nn.utils.clip_grad_norm_'s coefficient for max norm `max_norm` (> 0) from the global
  // sum of squares of the reduced gradients scaled by `grad_scale` (the average over ranks and
  // micro-batches).
  static float clip_coefficient(float max_norm, double grad_sum_sq, float grad_scale);
  // The global gradient norm of the last checked step (sqrt(sum of squares) x grad_scale).
  void set_last_grad_norm(double norm) { last_grad_norm_ = norm; }
  double last_grad_norm() const { return last_grad_norm_; }

 private:
  // local_grad_sum_sq over the reduced gradients as T (float or Bf16).
  template <class T>
  double sum_of_stepped_squares(std::vector<ReadSpan<T>>& spans, int rank);

  const ModePlan& mode_;
  const BucketPlan& plan_;
  ParameterStore& store_;
  const ReduceBuffer& gradients_;
  ShardedOptimizer& optimizer_;
  Communicator& broadcast_comm_;
  ExecContext compute_;
  Tracer* tracer_;
  std::string reduce_stream_name_;
  StepObserver* observer_ = nullptr;

  std::vector<Work> interleaved_task_;  // interleaved: the continuation that steps and broadcasts
  std::vector<Work> broadcast_work_;    // written where start_broadcast runs
  std::vector<NextForward> next_forward_;  // main thread
  double last_grad_norm_ = 0.0;
  // The norm's buckets, reused every step (one of the two, by the reduced gradients' dtype).
  std::vector<ReadSpan<float>> norm_spans_f32_;
  std::vector<ReadSpan<Bf16>> norm_spans_bf16_;
};

}  // namespace zl
