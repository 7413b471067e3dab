// BucketSteps: step, broadcast, per-layer wait and clip coefficient (see bucket_steps.h).
#include "runtime/train/bucket_steps.h"

#include <cmath>

#include "base/tracer.h"
#include "kernels/elementwise.h"
#include "runtime/comm/traced_collective.h"

namespace zl {

BucketSteps::BucketSteps(const ModePlan& mode, const BucketPlan& plan, ParameterStore& store,
                         ShardedOptimizer& optimizer, Communicator& broadcast_comm,
                         ExecContext compute, Tracer* tracer)
    : mode_(mode),
      plan_(plan),
      store_(store),
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
    optimizer_.step_bucket(bucket, scalars, exec);
  }
  if (observer_) observer_->on_step_event({StepEvent::Kind::StepEnd, bucket});
}

void BucketSteps::broadcast_bucket(int bucket, const ExecContext* issuing_stream) {
  const Bucket& b = plan_.buckets[static_cast<std::size_t>(bucket)];
  if (observer_) observer_->on_step_event({StepEvent::Kind::BroadcastLaunched, bucket});
  broadcast_work_[static_cast<std::size_t>(bucket)] =
      traced_collective(broadcast_comm_, tracer_, bucket, "broadcast", b.bytes(), [&] {
        return broadcast_comm_.broadcast(store_.data() + b.offset, b.numel, b.assigned_rank,
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

double BucketSteps::local_grad_sum_sq(int rank) {
  // One read-back for all of this rank's buckets (CUDA), added in bucket order.
  norm_spans_.clear();
  for (const auto& b : plan_.buckets) {
    if (mode_.steps_on(b, rank)) norm_spans_.push_back({store_.grad() + b.offset, b.numel});
  }
  return total_sum_of_squares(compute_, norm_spans_.data(),
                              static_cast<std::int64_t>(norm_spans_.size()));
}

float BucketSteps::clip_coefficient(float max_norm, double grad_sum_sq, float grad_scale) {
  const double norm = std::sqrt(grad_sum_sq) * static_cast<double>(grad_scale);
  // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
  const double coef = static_cast<double>(max_norm) / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

}  // namespace zl
