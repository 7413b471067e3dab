// Reducer: grad-ready counting and the in-order start of bucket collectives (see reducer.h).
#include "runtime/train/reducer.h"

#include "base/errors.h"
#include "base/tracer.h"
#include "runtime/comm/traced_collective.h"

namespace zl {

Reducer::Reducer(const BucketPlan& plan, ReduceBuffer& buffer, Communicator& comm,
                 CollectiveOp bucket_collective, ExecContext compute, Tracer* tracer)
    : plan_(plan),
      buffer_(buffer),
      comm_(comm),
      op_(bucket_collective),
      compute_(compute),
      tracer_(tracer) {
  ZL_CHECK(op_ == CollectiveOp::AllReduce || op_ == CollectiveOp::Reduce,
           "a bucket's gradients are all-reduced or reduced, not {}", collective_name(op_));
  pending_.assign(plan.buckets.size(), 0);
  work_.resize(plan.buckets.size());
}

void Reducer::begin_final_backward() {
  for (const auto& b : plan_.buckets) {
    pending_[static_cast<std::size_t>(b.index)] = static_cast<int>(b.param_ids.size());
  }
  next_ = 0;
  in_final_backward_ = true;
}

void Reducer::gradient_ready(int param_id) {
  if (!in_final_backward_) return;
  const int bucket = plan_.bucket_of_param[static_cast<std::size_t>(param_id)];
  int& pending = pending_[static_cast<std::size_t>(bucket)];
  ZL_CHECK(pending > 0, "gradient of parameter {} reported twice in one backward", param_id);
  --pending;
}

std::optional<int> Reducer::start_next_collective() {
  if (!in_final_backward_ || next_ == static_cast<int>(plan_.buckets.size()) ||
      pending_[static_cast<std::size_t>(next_)] > 0) {
    return std::nullopt;
  }
  const int bucket = next_++;
  const Bucket& b = plan_.buckets[static_cast<std::size_t>(bucket)];
  // bf16: the cast goes on the compute stream, which the collective (issued with the default
  // issuing stream) follows; on the CPU it is done when prepare() returns.
  void* grad = buffer_.prepare(b, compute_);
  const DType dtype = buffer_.dtype();
  if (observer_) {
    observer_->on_step_event({.kind = StepEvent::Kind::CollectiveStarted, .bucket = bucket});
  }
  Work& work = work_[static_cast<std::size_t>(bucket)];
  work = traced_collective(comm_, tracer_, bucket, collective_name(op_),
                           b.numel * dtype_size(dtype), [&] {
    return op_ == CollectiveOp::Reduce
               ? comm_.reduce(grad, b.numel, dtype, b.assigned_rank, ReduceOp::Sum)
               : comm_.all_reduce(grad, b.numel, dtype, ReduceOp::Sum);
  });
  if (observer_) {
    // Waiting for the event's task (stream order: after the collective) keeps the recorded order
    // truthful: nothing that waits for this bucket runs before CollectiveDone is recorded.
    StepObserver* observer = observer_;
    work = comm_.then([observer, bucket](const ExecContext&) {
      observer->on_step_event({.kind = StepEvent::Kind::CollectiveDone, .bucket = bucket});
    });
  }
  return bucket;
}

void Reducer::end_final_backward() {
  ZL_CHECK(next_ == static_cast<int>(plan_.buckets.size()),
           "backward finished with {} of {} bucket collectives started (a parameter reported no "
           "gradient)",
           next_, plan_.buckets.size());
  in_final_backward_ = false;
}

void Reducer::wait_collectives(const ExecContext& exec) const {
  for (const auto& w : work_) w.stream_wait(exec);
}

}  // namespace zl
