// BucketOps: the per-bucket operations every schedule is made of, written once. step_bucket(b)
// runs the fused optimizer update of a bucket this rank owns (owns(b): ModePlan::steps_on),
// publish(b) sends a stepped bucket to every rank (a broadcast from its assigned rank, or the
// all-gather of every rank's shard), and wait_for_bucket(b) is the per-layer wait of the next
// forward for that publish. Also this rank's share of the gradient norm. The schedules
// (schedule.h) only decide *when*, and say what: `if (owns(b)) step_bucket(b); publish(b)`.
//
// Threads: step_bucket and publish run on the main thread, or in interleaved mode on the
// reduce communicator's stream (one continuation per bucket, in bucket order). The per-layer wait
// state (forward_waits_for, wait_for_bucket) is the main thread's alone.
#pragma once

#include <string>
#include <vector>

#include "base/exec_context.h"
#include "kernels/elementwise.h"
#include "models/parameter_store.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/step/gradient_store.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/rank_optimizer.h"
#include "runtime/train/step/step_context.h"

namespace zl {

// Where a bucket's step runs: on the main thread's compute stream, or inside a continuation on
// the reduce communicator's stream (interleaved). It names the span in the trace and timeline.
enum class StepStream { Compute, Reduce };

// Whether the next forward must wait for a bucket's broadcast before reading its parameters.
enum class NextForward : unsigned char { ReadsAtOnce, WaitsForBroadcast };

class BucketOps {
 public:
  // `gradients`: where the buckets' reduced gradients are (the step and the gradient norm read
  // them); `reduce_stream_name`: the stream interleaved steps run on (Reducer::reduced_on: the
  // reduce communicator's, with hybrid sharding the replica one's), for StepStream::Reduce.
  BucketOps(const StepContext& step, const GradientStore& gradients, RankOptimizer& optimizer,
            Communicator& broadcast_comm, std::string reduce_stream_name);

  // Whether this rank steps (some of) bucket b.
  bool owns(int bucket) const { return optimizer_.owns(bucket); }
  // The fused update of bucket b, which this rank owns, on `exec` (the compute stream, or the
  // reduce stream a continuation was handed).
  void step_bucket(int bucket, const StepScalars& scalars, const ExecContext& exec,
                   StepStream stream);
  // Whether a stepped bucket is published (ModePlan::broadcast_after_step: not at stage 3, whose
  // next forward gathers the stepped shards).
  bool publishes() const { return step_.mode.broadcast_after_step; }
  // Starts bucket b's publish - its broadcast from its assigned rank, or (element shards) its
  // all-gather of every rank's shard - on the broadcast communicator, after the work issued so
  // far on `issuing_stream` (null: the compute stream; communicator.h). It sends the store's
  // parameters in their dtype: 2 bytes per element for bf16, which the bf16 step wrote there.
  void publish(int bucket, const ExecContext* issuing_stream = nullptr);
  // Blocks until every bucket's publish completed.
  void wait_publishes() {
    for (auto& w : broadcast_work_) w.wait();
  }
  // A skipped step publishes nothing: its publishes leave the collective program of this step.
  void skip_publishes();

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
  // The per-layer wait, before the forward reads bucket b's parameters (the param-use hook).
  void wait_for_bucket(int bucket);
  // Every wait still pending (before eval, checkpoints, reading parameters).
  void wait_for_all_parameters();

  // This rank's share of the sum of squares of the reduced gradient: the elements it steps (every
  // bucket in ddp; in zero only the assigned rank is sure to hold a bucket's reduced gradient;
  // with element shards the rank's shard of each bucket, zero padding adding nothing),
  // added in bucket order, one read-back on CUDA. Every bucket's collective must have completed
  // (CUDA: be ordered before the compute stream). The step's check and the clip norm use it.
  // bf16 reduced gradients (reduce_dtype = "bf16") are summed in double, as fp32 ones.
  double local_grad_sum_sq(int rank);

 private:
  // local_grad_sum_sq over the reduced gradients as T (float or Bf16).
  template <class T>
  double sum_of_stepped_squares(std::vector<ReadSpan<T>>& spans, int rank);

  const StepContext& step_;
  const GradientStore& gradients_;
  RankOptimizer& optimizer_;
  Communicator& broadcast_comm_;
  std::string reduce_stream_name_;

  std::vector<Work> interleaved_task_;  // interleaved: the continuation that steps and broadcasts
  std::vector<Work> broadcast_work_;    // written where publish runs
  std::vector<NextForward> next_forward_;  // main thread
  // The norm's buckets, reused every step (one of the two, by the reduced gradients' dtype).
  std::vector<ReadSpan<float>> norm_spans_f32_;
  std::vector<ReadSpan<Bf16>> norm_spans_bf16_;
};

}  // namespace zl
