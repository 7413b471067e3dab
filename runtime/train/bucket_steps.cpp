// BucketSteps: step, broadcast, per-layer wait and clip coefficient (see bucket_steps.h).
#include "runtime/train/bucket_steps.h"

#include <cmath>

#include "base/tracer.h"
#include "kernels/elementwise.h"
#include "runtime/comm/traced_collective.h"

namespace zl {

BucketSteps::BucketSteps(const ModePlan& mode, const BucketPlan& plan, ParameterStore& store,
                         const GradientWire& wire, ShardedOptimizer& optimizer,
                         Communicator& broadcast_comm, ExecContext compute, Tracer* tracer)
    : mode_(mode),
      plan_(plan),
      store_(store),
      wire_(wire),
      optimizer_(optimizer),
      broadcast_comm_(broadcast_comm),
      compute_(compute),
      tracer_(tracer) {
  const std::size_t n = plan.buckets.size();
  step_work_.resize(n);
  broadcast_work_.resize(n);
  awaiting_.assign(n, 0);
}

void BucketSteps::step_bucket(int bucket, const StepScalars& scalars, const ExecContext& exec,
                              const std::string& trace_thread) {
  if (!optimizer_.owns(bucket)) return;
  if (observer_) observer_->on_step_event({StepEvent::Kind::StepBegin, bucket});
  {
    const std::int64_t elements = plan_.buckets[static_cast<std::size_t>(bucket)].numel;
    TraceSpan span(tracer_, trace_thread, "step", {{"bucket", bucket}, {"elements", elements}});
    TimelineScope timed(tracer_ ? &tracer_->timeline() : nullptr, exec,
                        trace_thread == "main" ? "compute" : trace_thread, "optimizer", bucket);
    optimizer_.step_bucket(bucket, scalars, exec,
                           wire_.gradient(plan_.buckets[static_cast<std::size_t>(bucket)]));
  }
  if (observer_) observer_->on_step_event({StepEvent::Kind::StepEnd, bucket});
}

void BucketSteps::broadcast_bucket(int bucket, const ExecContext* issuing_stream) {
  const Bucket& b = plan_.buckets[static_cast<std::size_t>(bucket)];
  if (observer_) observer_->on_step_event({StepEvent::Kind::BroadcastLaunched, bucket});
  const DType dtype = store_.param_dtype();
  void* params = static_cast<char*>(store_.raw_data()) + b.offset * dtype_size(dtype);
  const CollectiveOp op = mode_.parameter_collective;  // element shards: every rank's shard
  broadcast_work_[static_cast<std::size_t>(bucket)] = traced_collective(
      broadcast_comm_, tracer_, bucket, collective_name(op), b.numel * dtype_size(dtype), [&] {
        return op == CollectiveOp::AllGather
                   ? broadcast_comm_.all_gather(params, b.numel, dtype, issuing_stream)
                   : broadcast_comm_.broadcast(params, b.numel, dtype, b.assigned_rank,
                                               issuing_stream);
      });
}

void BucketSteps::wait_broadcasts() {
  for (auto& w : broadcast_work_) w.wait();
}

void BucketSteps::wait_before_use(int param_id) {
  const auto bucket =
      static_cast<std::size_t>(plan_.bucket_of_param[static_cast<std::size_t>(param_id)]);
  if (!awaiting_[bucket]) return;
  // The step task publishes broadcast_work_[bucket]; waiting on it first orders that write
  // before the read below (on CUDA the task already ran when it was issued). On CUDA both are
  // stream waits: only this layer's kernels on the compute stream wait for its bucket's
  // broadcast event, and the host goes on enqueueing the forward.
  // The compute stream idles from here until the broadcast completed: a "wait" span, which the
  // bench subtracts from forward (Note [Exposed communication], runtime/trace/timeline_summary.h).
  TimelineScope timed(tracer_ ? &tracer_->timeline() : nullptr, compute_, "compute", "wait",
                      static_cast<int>(bucket));
  step_work_[bucket].stream_wait(compute_);
  broadcast_work_[bucket].stream_wait(compute_);
  awaiting_[bucket] = 0;
}

void BucketSteps::wait_all_before_use() {
  for (std::size_t b = 0; b < awaiting_.size(); ++b) {
    if (awaiting_[b]) wait_before_use(plan_.buckets[b].param_ids.front());
  }
}

template <class T>
double BucketSteps::sum_of_stepped_squares(std::vector<ReadSpan<T>>& spans, int rank) {
  // One read-back for all of this rank's buckets (CUDA), added in bucket order.
  spans.clear();
  for (const auto& b : plan_.buckets) {
    // The stepped part: the whole bucket, or (element shards) this rank's reduced shard.
    const ElementRange range = mode_.stepped_range(plan_, b, rank);
    if (range.numel == 0) continue;
    spans.push_back(
        {static_cast<const T*>(wire_.gradient(b).data) + (range.offset - b.offset), range.numel});
  }
  return total_sum_of_squares(compute_, spans.data(), static_cast<std::int64_t>(spans.size()));
}

double BucketSteps::local_grad_sum_sq(int rank) {
  return wire_.dtype() == DType::BF16 ? sum_of_stepped_squares(norm_spans_bf16_, rank)
                                      : sum_of_stepped_squares(norm_spans_f32_, rank);
}

float BucketSteps::clip_coefficient(float max_norm, double grad_sum_sq, float grad_scale) {
  const double norm = std::sqrt(grad_sum_sq) * static_cast<double>(grad_scale);
  // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
  const double coef = static_cast<double>(max_norm) / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

}  // namespace zl
