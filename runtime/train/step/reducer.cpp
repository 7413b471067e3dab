// Reducer: grad-ready counting and the in-order start of bucket collectives (see reducer.h).
#include "runtime/train/step/reducer.h"

#include "base/errors.h"
#include "base/tracer.h"
#include "kernels/elementwise.h"
#include "runtime/comm/traced_collective.h"

namespace zl {

Reducer::Reducer(const StepContext& step, GradientStore& buffer, Communicator& comm,
                 Communicator* replica)
    : step_(step),
      buffer_(buffer),
      comm_(comm),
      replica_(replica),
      op_(step.mode.bucket_collective) {
  const ModePlan& mode = step.mode;
  ZL_CHECK(op_ == CollectiveOp::AllReduce || op_ == CollectiveOp::Reduce ||
               op_ == CollectiveOp::ReduceScatter,
           "a bucket's gradients are all-reduced, reduced or reduce-scattered, not {}",
           collective_name(op_));
  ZL_CHECK((replica != nullptr) == (mode.replicas > 1) && (!replica || mode.element_shards),
           "{} with {} replicas and {} replica communicator", mode.name(), mode.replicas,
           replica ? "a" : "no");
  pending_.assign(step.plan.buckets.size(), 0);
  work_.resize(step.plan.buckets.size());
}

void Reducer::begin_backward(MicroBatch micro) {
  final_ = micro.last();
  active_ = final_ || step_.mode.pools_gradients();
  micro_ = static_cast<int>(micro.index);
  if (!active_) return;
  if (step_.mode.pools_gradients()) {
    buffer_.pool().begin_backward(micro.first() ? Accumulate::Overwrite : Accumulate::Add);
  }
  for (const auto& b : step_.plan.buckets) {
    pending_[static_cast<std::size_t>(b.index)] = static_cast<int>(b.param_ids.size());
  }
  next_ = 0;
}

Accumulate Reducer::backward_accumulate(MicroBatch micro) const {
  // Stage 2: each micro-batch's gradients go to the shard through the pool, whose buffers are
  // another bucket's before.
  if (step_.mode.pools_gradients() || micro.first()) return Accumulate::Overwrite;
  return Accumulate::Add;
}

void Reducer::gradient_ready(int param_id) {
  if (!active_) return;
  const int bucket = step_.plan.bucket_of_param[static_cast<std::size_t>(param_id)];
  int& pending = pending_[static_cast<std::size_t>(bucket)];
  ZL_CHECK(pending > 0, "gradient of parameter {} reported twice in one backward", param_id);
  --pending;
}

std::optional<int> Reducer::start_next_collective() {
  if (!active_ || next_ == static_cast<int>(step_.plan.buckets.size()) ||
      pending_[static_cast<std::size_t>(next_)] > 0) {
    return std::nullopt;
  }
  const int bucket = next_++;
  const Bucket& b = step_.bucket(bucket);
  // bf16: the cast goes on the compute stream, which the collective (issued with the default
  // issuing stream) follows; on the CPU it is done when prepare() returns.
  void* grad = buffer_.prepare(b, step_.compute);
  const DType dtype = step_.mode.reduce_dtype;
  const int root = op_ == CollectiveOp::Reduce ? b.assigned_rank : -1;
  step_.program.issued({CommRole::Reduce, op_, bucket, b.numel, micro_, dtype, root});
  step_.notify(StepEvent::Kind::CollectiveStarted, bucket);
  Work& work = work_[static_cast<std::size_t>(bucket)];
  work = traced_collective(comm_, step_.tracer, bucket, collective_name(op_),
                           b.numel * dtype_size(dtype), [&] {
    switch (op_) {
      case CollectiveOp::Reduce:
        return comm_.reduce(grad, b.numel, dtype, root, ReduceOp::Sum);
      case CollectiveOp::ReduceScatter:  // element shards: this rank's shard gets the sum
        return comm_.reduce_scatter(grad, b.numel, dtype, ReduceOp::Sum);
      default: return comm_.all_reduce(grad, b.numel, dtype, ReduceOp::Sum);
    }
  });
  // Stage 2: the shard's accumulation follows on the stream, and frees the pool buffer.
  work = buffer_.finish(b, comm_, std::move(work));
  if (replica_ && final_) work = reduce_across_replicas(b, std::move(work));
  if (StepObserver* observer = step_.observer) {
    // Waiting for the event's task (stream order: after the collective) keeps the recorded order
    // truthful: nothing that waits for this bucket runs before CollectiveDone is recorded.
    work = reduced_on().then([observer, bucket](const ExecContext&) {
      observer->on_step_event({.kind = StepEvent::Kind::CollectiveDone, .bucket = bucket});
    });
  }
  return bucket;
}

Work Reducer::reduce_across_replicas(const Bucket& b, Work in_group) {
  Communicator& replica = *replica_;
  const ElementRange shard = step_.mode.stepped_range(step_.plan, b, comm_.rank());
  const ReplicaOperand x = buffer_.replica_operand(b, shard);
  const std::int64_t n = shard.numel;
  step_.program.issued(
      {CommRole::Replica, CollectiveOp::AllReduce, b.index, n, micro_, x.dtype, -1});
  // Not before the group's reduction of this bucket (Note [Replica all-reduce]).
  replica.then([in_group = std::move(in_group), x, n](const ExecContext& stream) {
    in_group.stream_wait(stream);
    if (x.widened != nullptr) cast(stream, x.widened, static_cast<Bf16*>(x.data), n);
  });
  const ExecContext stream = replica.exec();
  Work done = traced_collective(replica, step_.tracer, b.index,
                                collective_name(CollectiveOp::AllReduce), n * dtype_size(x.dtype),
                                [&] {
    return replica.all_reduce(x.data, n, x.dtype, ReduceOp::Sum, &stream);
  });
  if (x.widened == nullptr) return done;
  return replica.then([x, n](const ExecContext& stream) {
    cast(stream, static_cast<const Bf16*>(x.data), x.widened, n);
  });
}

void Reducer::end_backward() {
  if (!active_) return;
  ZL_CHECK(next_ == static_cast<int>(step_.plan.buckets.size()),
           "backward finished with {} of {} bucket collectives started (a parameter reported no "
           "gradient)",
           next_, step_.plan.buckets.size());
  active_ = false;
}

}  // namespace zl
