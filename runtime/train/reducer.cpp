// Reducer: per-bucket collectives from grad-ready hooks, and the step policy of each mode.
#include "runtime/train/reducer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kernels/elementwise.h"
#include "base/errors.h"
#include "runtime/comm/device.h"
#include "base/tracer.h"
#include "runtime/comm/traced_collective.h"

namespace zl {

namespace {
const std::string kMainThread = "main";
}  // namespace

Reducer::Reducer(const ParallelConfig& parallel, float clip_grad_norm, std::int64_t grad_accum,
                 const BucketPlan& plan, ParameterStore& store, ShardedOptimizer& optimizer,
                 Communicator& reduce_comm, Communicator& broadcast_comm, ExecContext compute,
                 Tracer* tracer)
    : parallel_(parallel),
      clip_grad_norm_(clip_grad_norm),
      grad_accum_(grad_accum),
      plan_(plan),
      store_(store),
      optimizer_(optimizer),
      reduce_comm_(reduce_comm),
      broadcast_comm_(broadcast_comm),
      compute_(compute),
      tracer_(tracer) {
  ZL_CHECK(!(parallel.overlap == Overlap::Interleaved && clip_grad_norm > 0.0f),
           "interleaved overlap cannot clip (rejected at config time)");
  const std::size_t n = plan.buckets.size();
  pending_grads_.assign(n, 0);
  collective_work_.resize(n);
  step_work_.resize(n);
  broadcast_work_.resize(n);
  awaiting_broadcast_.assign(n, 0);
  grad_ready_hook_ = [this](int id) { on_grad_ready(id); };
  param_use_hook_ = [this](int id) { before_param_use(id); };
}

void Reducer::broadcast_initial_parameters() {
  // In chunks: one MPI call counts elements in an int.
  constexpr std::int64_t kChunk = std::int64_t{1} << 30;
  Work last;
  for (std::int64_t offset = 0; offset < store_.total_numel(); offset += kChunk) {
    last = broadcast_comm_.broadcast(store_.data() + offset,
                                     std::min(kChunk, store_.total_numel() - offset), 0);
  }
  last.wait();  // stream order: every earlier chunk is done too
}

void Reducer::note(StepEvent::Kind kind, int bucket) {
  if (!record_events_) return;
  std::lock_guard lock(events_mutex_);
  events_.push_back(StepEvent{kind, bucket});
}

std::vector<StepEvent> Reducer::take_events() {
  std::lock_guard lock(events_mutex_);
  return std::exchange(events_, {});
}

void Reducer::begin_backward(std::int64_t micro_batch) {
  ZL_CHECK(micro_batch >= 0 && micro_batch < grad_accum_, "micro-batch {} of {}", micro_batch,
           grad_accum_);
  micro_batch_ = micro_batch;
  sync_this_backward_ = micro_batch == grad_accum_ - 1;
  if (!sync_this_backward_) return;
  for (const auto& b : plan_.buckets) {
    pending_grads_[static_cast<std::size_t>(b.index)] = static_cast<int>(b.param_ids.size());
  }
  next_to_launch_ = 0;
  // Gradients hold the sum over ranks and micro-batches of per-micro-batch mean gradients:
  // averaging (invariant 6) is folded into the fused step as grad_scale.
  const float grad_scale =
      1.0f / static_cast<float>(static_cast<std::int64_t>(reduce_comm_.size()) * grad_accum_);
  scalars_ = optimizer_.next_step(grad_scale);
}

void Reducer::on_grad_ready(int param_id) {
  if (!sync_this_backward_) return;
  const int bucket = plan_.bucket_of_param[static_cast<std::size_t>(param_id)];
  int& pending = pending_grads_[static_cast<std::size_t>(bucket)];
  ZL_CHECK(pending > 0, "gradient of parameter {} reported twice in one backward", param_id);
  if (--pending > 0) return;
  // Launch every complete bucket in index order: the order is then the same on every rank even
  // for a model whose backward finished buckets out of order.
  const int count = static_cast<int>(plan_.buckets.size());
  while (next_to_launch_ < count && pending_grads_[static_cast<std::size_t>(next_to_launch_)] == 0) {
    launch_collective(next_to_launch_++);
  }
}

void Reducer::launch_collective(int bucket) {
  const Bucket& b = plan_.buckets[static_cast<std::size_t>(bucket)];
  float* grad = store_.grad() + b.offset;
  note(StepEvent::Kind::CollectiveLaunched, bucket);
  const bool reduce_to_owner =
      is_zero() && parallel_.collective == CollectiveKind::ReduceBroadcast;
  collective_work_[static_cast<std::size_t>(bucket)] = traced_collective(
      reduce_comm_, tracer_, bucket, reduce_to_owner ? "reduce" : "all_reduce", b.bytes(), [&] {
        return reduce_to_owner ? reduce_comm_.reduce(grad, b.numel, b.assigned_rank, ReduceOp::Sum)
                               : reduce_comm_.all_reduce(grad, b.numel, ReduceOp::Sum);
      });
  if (record_events_) {
    // Waiting for the note (stream order: after the collective) keeps recorded order truthful.
    collective_work_[static_cast<std::size_t>(bucket)] =
        reduce_comm_.then([this, bucket] { note(StepEvent::Kind::CollectiveDone, bucket); });
  }
  if (is_zero() && parallel_.overlap == Overlap::Interleaved) {
    // Runs on the reduce stream after this bucket's collective (and all earlier ones): step the
    // bucket right there, then issue its broadcast (Note [Two communicators]).
    const StepScalars scalars = scalars_;
    step_work_[static_cast<std::size_t>(bucket)] = reduce_comm_.then([this, bucket, scalars] {
      if (optimizer_.owns(bucket)) step_bucket(bucket, scalars, reduce_comm_.exec(), reduce_comm_.name());
      broadcast_bucket(bucket);
    });
  }
}

void Reducer::step_bucket(int bucket, const StepScalars& scalars, const ExecContext& exec,
                          const std::string& trace_thread) {
  note(StepEvent::Kind::StepBegin, bucket);
  {
    TraceSpan span(tracer_, trace_thread, "step",
                   {{"bucket", bucket}, {"elements", plan_.buckets[bucket].numel}});
    optimizer_.step_bucket(bucket, scalars, exec);
  }
  note(StepEvent::Kind::StepEnd, bucket);
}

void Reducer::broadcast_bucket(int bucket) {
  const Bucket& b = plan_.buckets[static_cast<std::size_t>(bucket)];
  note(StepEvent::Kind::BroadcastLaunched, bucket);
  broadcast_work_[static_cast<std::size_t>(bucket)] =
      traced_collective(broadcast_comm_, tracer_, bucket, "broadcast", b.bytes(), [&] {
        return broadcast_comm_.broadcast(store_.data() + b.offset, b.numel, b.assigned_rank);
      });
}

void Reducer::wait_collectives() {
  // CPU: blocks until every bucket's collective completed. CUDA: the compute stream waits for
  // each collective's event, so the steps enqueued next follow them and the host moves on.
  for (auto& w : collective_work_) w.stream_wait(compute_);
}

StepScalars Reducer::clipped_scalars() {
  StepScalars s = scalars_;
  s.grad_scale *= clip_coefficient();
  return s;
}

float Reducer::clip_coefficient() {
  if (clip_grad_norm_ <= 0.0f) return 1.0f;
  // Sum of squares of the reduced gradients: in ddp every rank holds all of them; in zero only the
  // owner is sure to (reduce_broadcast), so owners contribute partial sums to a scalar all-reduce.
  double sum_sq = 0.0;
  for (const auto& b : plan_.buckets) {
    if (is_zero() && b.assigned_rank != reduce_comm_.rank()) continue;
    sum_sq += sum_of_squares(compute_, store_.grad() + b.offset, b.numel);
  }
  if (is_zero()) reduce_comm_.all_reduce_f64(&sum_sq, 1).wait();
  const double norm = std::sqrt(sum_sq) * static_cast<double>(scalars_.grad_scale);
  last_grad_norm_ = norm;
  // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
  const double coef = static_cast<double>(clip_grad_norm_) / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

void Reducer::finish_backward() {
  ZL_CHECK(next_to_launch_ == static_cast<int>(plan_.buckets.size()),
           "backward finished with {} of {} buckets launched (a parameter reported no gradient)",
           next_to_launch_, plan_.buckets.size());
  sync_this_backward_ = false;

  if (!is_zero()) {  // ddp: every rank runs the whole optimizer on the all-reduced gradients
    wait_collectives();
    const StepScalars s = clipped_scalars();
    for (const auto& b : plan_.buckets) step_bucket(b.index, s, compute_, kMainThread);
    return;
  }

  switch (parallel_.overlap) {
    case Overlap::None: {
      wait_collectives();
      const StepScalars s = clipped_scalars();
      for (const auto& b : plan_.buckets) {
        if (optimizer_.owns(b.index)) step_bucket(b.index, s, compute_, kMainThread);
      }
      for (const auto& b : plan_.buckets) broadcast_bucket(b.index);
      for (auto& w : broadcast_work_) w.wait();
      return;
    }
    case Overlap::AfterBackward: {
      if (clip_grad_norm_ > 0.0f) wait_collectives();  // the norm needs every bucket reduced
      const StepScalars s = clipped_scalars();
      for (const auto& b : plan_.buckets) {
        // A stream wait (host wait on the CPU): on CUDA the step kernel on the compute stream
        // follows this bucket's collective and the host goes on issuing the next bucket.
        collective_work_[static_cast<std::size_t>(b.index)].stream_wait(compute_);
        if (optimizer_.owns(b.index)) step_bucket(b.index, s, compute_, kMainThread);
        broadcast_bucket(b.index);
        awaiting_broadcast_[static_cast<std::size_t>(b.index)] = 1;
      }
      return;
    }
    case Overlap::Interleaved: {
      // Steps and broadcasts were issued from the collectives' callbacks.
      for (const auto& b : plan_.buckets) awaiting_broadcast_[static_cast<std::size_t>(b.index)] = 1;
      return;
    }
  }
}

void Reducer::before_param_use(int param_id) {
  const auto bucket = static_cast<std::size_t>(plan_.bucket_of_param[static_cast<std::size_t>(param_id)]);
  if (!awaiting_broadcast_[bucket]) return;
  // The step callback publishes broadcast_work_[bucket]; waiting on it first orders that write
  // before the read below (on CUDA the callback already ran when it was issued). On CUDA both are
  // stream waits: only this layer's kernels on the compute stream wait for its bucket's
  // broadcast event, and the host goes on enqueueing the forward.
  step_work_[bucket].stream_wait(compute_);
  broadcast_work_[bucket].stream_wait(compute_);
  awaiting_broadcast_[bucket] = 0;
}

void Reducer::synchronize() {
  for (std::size_t b = 0; b < awaiting_broadcast_.size(); ++b) {
    if (awaiting_broadcast_[b]) before_param_use(plan_.buckets[b].param_ids.front());
  }
  reduce_comm_.synchronize();
  broadcast_comm_.synchronize();
  // CUDA: steps (ddp, none, after_backward) and forward waits live on the compute stream. It can
  // only be waiting for collectives that just completed, so this wait cannot hang.
  synchronize_stream(compute_);
}

}  // namespace zl
