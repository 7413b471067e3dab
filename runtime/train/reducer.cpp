// Reducer: grad-ready counting and the in-order launch of bucket collectives (see reducer.h).
#include "runtime/train/reducer.h"

#include "base/errors.h"
#include "base/tracer.h"
#include "runtime/comm/traced_collective.h"

namespace zl {

Reducer::Reducer(const BucketPlan& plan, GradientWire& wire, Communicator& comm,
                 CollectiveOp bucket_collective, ExecContext compute, Tracer* tracer)
    : plan_(plan),
      wire_(wire),
      comm_(comm),
      op_(bucket_collective),
      compute_(compute),
      tracer_(tracer) {
  ZL_CHECK(op_ == CollectiveOp::AllReduce || op_ == CollectiveOp::Reduce ||
               op_ == CollectiveOp::ReduceScatter,
           "a bucket's gradients are all-reduced, reduced or reduce-scattered, not {}",
           collective_name(op_));
  pending_.assign(plan.buckets.size(), 0);
  work_.resize(plan.buckets.size());
}

void Reducer::arm() {
  for (const auto& b : plan_.buckets) {
    pending_[static_cast<std::size_t>(b.index)] = static_cast<int>(b.param_ids.size());
  }
  next_ = 0;
  armed_ = true;
}

void Reducer::on_grad_ready(int param_id) {
  if (!armed_) return;
  const int bucket = plan_.bucket_of_param[static_cast<std::size_t>(param_id)];
  int& pending = pending_[static_cast<std::size_t>(bucket)];
  ZL_CHECK(pending > 0, "gradient of parameter {} reported twice in one backward", param_id);
  if (--pending > 0) return;
  // Launch every complete bucket in index order: the order is then the same on every rank even
  // for a model whose backward finished buckets out of order.
  const int count = static_cast<int>(plan_.buckets.size());
  while (next_ < count && pending_[static_cast<std::size_t>(next_)] == 0) launch(next_++);
}

void Reducer::disarm() {
  ZL_CHECK(next_ == static_cast<int>(plan_.buckets.size()),
           "backward finished with {} of {} buckets launched (a parameter reported no gradient)",
           next_, plan_.buckets.size());
  armed_ = false;
}

void Reducer::launch(int bucket) {
  const Bucket& b = plan_.buckets[static_cast<std::size_t>(bucket)];
  // bf16: the cast goes on the compute stream, which the collective (issued with the default
  // issuing stream) follows; on the CPU it is done when stage() returns.
  void* grad = wire_.stage(b, compute_);
  const DType dtype = wire_.dtype();
  if (observer_) observer_->on_step_event({StepEvent::Kind::CollectiveLaunched, bucket});
  Work& work = work_[static_cast<std::size_t>(bucket)];
  work = traced_collective(comm_, tracer_, bucket, collective_name(op_),
                           b.numel * dtype_size(dtype), [&] {
    switch (op_) {
      case CollectiveOp::Reduce:
        return comm_.reduce(grad, b.numel, dtype, b.assigned_rank, ReduceOp::Sum);
      case CollectiveOp::ReduceScatter:  // element shards: this rank's shard gets the sum
        return comm_.reduce_scatter(grad, b.numel, dtype, ReduceOp::Sum);
      default: return comm_.all_reduce(grad, b.numel, dtype, ReduceOp::Sum);
    }
  });
  if (observer_) {
    // Waiting for the event's task (stream order: after the collective) keeps the recorded order
    // truthful: nothing that waits for this bucket runs before CollectiveDone is recorded.
    StepObserver* observer = observer_;
    work = comm_.then([observer, bucket](const ExecContext&) {
      observer->on_step_event({StepEvent::Kind::CollectiveDone, bucket});
    });
  }
  if (issued_) issued_(bucket);
}

void Reducer::stream_wait_all(const ExecContext& exec) const {
  for (const auto& w : work_) w.stream_wait(exec);
}

}  // namespace zl
