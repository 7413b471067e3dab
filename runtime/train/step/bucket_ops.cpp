// BucketOps: step, broadcast, per-layer wait and gradient norm (see bucket_ops.h).
#include "runtime/train/step/bucket_ops.h"

#include "base/errors.h"
#include "base/tracer.h"
#include "kernels/elementwise.h"
#include "runtime/comm/traced_collective.h"

namespace zl {

BucketOps::BucketOps(const StepContext& step, const GradientStore& gradients,
                     RankOptimizer& optimizer, Communicator& broadcast_comm,
                     std::string reduce_stream_name)
    : step_(step),
      gradients_(gradients),
      optimizer_(optimizer),
      broadcast_comm_(broadcast_comm),
      reduce_stream_name_(std::move(reduce_stream_name)) {
  const std::size_t n = step.plan.buckets.size();
  interleaved_task_.resize(n);
  broadcast_work_.resize(n);
  next_forward_.assign(n, NextForward::ReadsAtOnce);
}

void BucketOps::step_bucket(int bucket, const StepScalars& scalars, const ExecContext& exec,
                            StepStream stream) {
  // Checked before any side effect (the observer's StepBegin, the spans, the gradient's lookup).
  ZL_CHECK(optimizer_.owns(bucket), "bucket {} stepped on a rank that does not own it", bucket);
  step_.notify(StepEvent::Kind::StepBegin, bucket);
  {
    const Bucket& b = step_.bucket(bucket);
    // The trace names threads (the main thread, the comm stream), the timeline streams
    // ("compute", the comm stream).
    const bool on_compute = stream == StepStream::Compute;
    TraceSpan span(step_.tracer, on_compute ? kMainTraceThread : reduce_stream_name_, "step",
                   {{"bucket", bucket}, {"elements", b.numel}});
    TimelineScope timed(step_.timeline(), exec, on_compute ? "compute" : reduce_stream_name_,
                        "optimizer", bucket);
    optimizer_.step_bucket(bucket, scalars, exec,
                           gradients_.gradient(b, optimizer_.stepped(bucket)));
  }
  step_.notify(StepEvent::Kind::StepEnd, bucket);
}

void BucketOps::publish(int bucket, const ExecContext* issuing_stream) {
  ZL_CHECK(publishes(), "bucket {} published in {}, which publishes nothing", bucket,
           step_.mode.name());
  const Bucket& b = step_.bucket(bucket);
  const CollectiveOp op = step_.mode.parameter_collective;  // element shards: every rank's shard
  const DType dtype = step_.store.param_dtype();
  const int root = op == CollectiveOp::Broadcast ? b.assigned_rank : -1;
  const int micro = step_.mode.micro_batches - 1;
  step_.program.issued({CommRole::Broadcast, op, bucket, b.numel, micro, dtype, root});
  step_.notify(StepEvent::Kind::BroadcastStarted, bucket);
  void* params = static_cast<char*>(step_.store.raw_data()) + b.offset * dtype_size(dtype);
  broadcast_work_[static_cast<std::size_t>(bucket)] = traced_collective(
      broadcast_comm_, step_.tracer, bucket, collective_name(op), b.numel * dtype_size(dtype), [&] {
        return op == CollectiveOp::AllGather
                   ? broadcast_comm_.all_gather(params, b.numel, dtype, issuing_stream)
                   : broadcast_comm_.broadcast(params, b.numel, dtype, root, issuing_stream);
      });
}

void BucketOps::skip_publishes() {
  if (!publishes()) return;
  step_.program.skip(CommRole::Broadcast, step_.mode.parameter_collective,
                     static_cast<int>(step_.plan.buckets.size()));
}

void BucketOps::wait_for_bucket(int b) {
  const auto bucket = static_cast<std::size_t>(b);
  if (next_forward_[bucket] == NextForward::ReadsAtOnce) return;
  // The interleaved continuation publishes broadcast_work_[bucket]; waiting on it first orders
  // that write before the read below (on CUDA the continuation already ran when it was issued). On
  // CUDA both are stream waits: only this layer's kernels on the compute stream wait for its
  // bucket's broadcast event, and the host goes on enqueueing the forward. The compute stream idles
  // from here until the broadcast completed: a "wait" span, which the bench subtracts from forward
  // (Note [Exposed communication], runtime/trace/timeline_summary.h).
  TimelineScope timed(step_.timeline(), step_.compute, "compute", "wait", b);
  interleaved_task_[bucket].stream_wait(step_.compute);
  broadcast_work_[bucket].stream_wait(step_.compute);
  next_forward_[bucket] = NextForward::ReadsAtOnce;
}

void BucketOps::wait_for_all_parameters() {
  // wait_for_bucket passes over the buckets that wait for nothing.
  for (std::size_t b = 0; b < next_forward_.size(); ++b) wait_for_bucket(static_cast<int>(b));
}

template <class T>
double BucketOps::sum_of_stepped_squares(std::vector<ReadSpan<T>>& spans, int rank) {
  // One read-back for all of this rank's buckets (CUDA), added in bucket order.
  spans.clear();
  for (const auto& b : step_.plan.buckets) {
    // The stepped part: the whole bucket, or (element shards) this rank's reduced shard.
    const ElementRange range = step_.mode.stepped_range(step_.plan, b, rank);
    if (range.numel == 0) continue;
    spans.push_back({static_cast<const T*>(gradients_.gradient(b, range).data), range.numel});
  }
  return total_sum_of_squares(step_.compute, spans.data(), static_cast<std::int64_t>(spans.size()));
}

double BucketOps::local_grad_sum_sq(int rank) {
  return gradients_.dtype() == DType::BF16 ? sum_of_stepped_squares(norm_spans_bf16_, rank)
                                           : sum_of_stepped_squares(norm_spans_f32_, rank);
}

}  // namespace zl
