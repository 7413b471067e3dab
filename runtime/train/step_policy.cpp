// The four step policies (see step_policy.h); each is only an order of the shared primitives.
#include "runtime/train/step_policy.h"

#include <cmath>
#include <string>
#include <utility>

#include "base/errors.h"

namespace zl {
namespace {

const std::string kMainThread = "main";

class DdpPolicy final : public StepPolicy {
 public:
  using StepPolicy::StepPolicy;
  StepVerdict finish_backward(const StepScalars& scalars, const StepLossFn& step_loss) override {
    ctx_.reducer.stream_wait_all(ctx_.steps.compute());
    const StepVerdict verdict = check(scalars, step_loss);
    if (!verdict.finite) return verdict;
    const StepScalars s = clipped(scalars, verdict);
    for (const auto& b : ctx_.plan.buckets) {
      ctx_.steps.step_bucket(b.index, s, ctx_.steps.compute(), kMainThread);
    }
    return verdict;
  }
};

class ZeroNonePolicy final : public StepPolicy {
 public:
  using StepPolicy::StepPolicy;
  StepVerdict finish_backward(const StepScalars& scalars, const StepLossFn& step_loss) override {
    ctx_.reducer.stream_wait_all(ctx_.steps.compute());
    const StepVerdict verdict = check(scalars, step_loss);
    if (!verdict.finite) return verdict;  // no rank steps or broadcasts: all keep their parameters
    const StepScalars s = clipped(scalars, verdict);
    for (const auto& b : ctx_.plan.buckets) {
      ctx_.steps.step_bucket(b.index, s, ctx_.steps.compute(), kMainThread);
    }
    for (const auto& b : ctx_.plan.buckets) ctx_.steps.broadcast_bucket(b.index);
    ctx_.steps.wait_broadcasts();
    return verdict;
  }
};

class ZeroAfterBackwardPolicy final : public StepPolicy {
 public:
  using StepPolicy::StepPolicy;
  StepVerdict finish_backward(const StepScalars& scalars, const StepLossFn& step_loss) override {
    // The norm needs every bucket reduced before the first step, and so does a skip; a stop can
    // be decided after the steps were issued, which keeps steps overlapping later collectives.
    const bool check_first =
        ctx_.clip_grad_norm > 0.0f || ctx_.on_nonfinite == OnNonfinite::SkipStep;
    StepVerdict verdict;
    if (check_first) {
      ctx_.reducer.stream_wait_all(ctx_.steps.compute());
      verdict = check(scalars, step_loss);
      if (!verdict.finite) return verdict;
    }
    const StepScalars s = clipped(scalars, verdict);
    for (const auto& b : ctx_.plan.buckets) {
      // A stream wait (host wait on the CPU): on CUDA the step kernel on the compute stream
      // follows this bucket's collective and the host goes on issuing the next bucket.
      ctx_.reducer.work(b.index).stream_wait(ctx_.steps.compute());
      ctx_.steps.step_bucket(b.index, s, ctx_.steps.compute(), kMainThread);
      ctx_.steps.broadcast_bucket(b.index);
      ctx_.steps.expect_broadcast(b.index);
    }
    return check_first ? verdict : check(scalars, step_loss);
  }
};

class ZeroInterleavedPolicy final : public StepPolicy {
 public:
  explicit ZeroInterleavedPolicy(PolicyContext ctx) : StepPolicy(ctx) {
    ZL_CHECK(ctx.clip_grad_norm <= 0.0f,
             "interleaved overlap cannot clip (rejected at config time)");
    ZL_CHECK(ctx.on_nonfinite == OnNonfinite::Stop,
             "interleaved overlap cannot skip a step (rejected at config time)");
  }
  void on_collective_issued(int bucket, const StepScalars& scalars) override {
    // Runs on the reduce stream after this bucket's collective (and all earlier ones): step the
    // bucket right there, then issue its broadcast (Note [Two communicators] in reducer.h); the
    // last two buckets are the exception below.
    //
    // Note [Tail broadcast order]: the last bucket (the first layers) is final only when backward
    // ends, and the next forward needs its parameters first. In bucket order, the second-to-last
    // bucket's step holds the reduce stream and its broadcast holds the link while the last
    // bucket waits to be reduced, and the last broadcast then queues behind it: the forward
    // waits for all of it. So the second-to-last bucket's task does nothing, and the last
    // bucket's task steps and broadcasts the last bucket, then steps and broadcasts the
    // second-to-last: the last collective starts as soon as backward ends, and the
    // second-to-last bucket's step and transfer overlap the next forward's first layers (which
    // wait per bucket, BucketSteps::wait_before_use). Critical path first, as in priority-based
    // parameter propagation. With 2 buckets only the broadcasts swap: bucket 0 is still stepped
    // before bucket 1's collective completes, which is what interleaved means. The order is
    // fixed, so every rank issues the same sequence on each communicator. 10 runs each of
    // `mpirun -np 2 zerolap bench configs/bench_overlap.toml --set link.bandwidth_gbps=10` at a
    // 2 MiB cap: reduce_broadcast hid 79% of its communication (median) in bucket order and
    // 82.5% in this order; allreduce_broadcast 75.5% and 78.5% (docs/bench.md).
    const int last = static_cast<int>(ctx_.plan.buckets.size()) - 1;
    const int second_last = last - 1;  // -1 with a single bucket: nothing is reordered
    const bool reordered = second_last >= 0;
    const bool second_last_steps_late = last >= 2;  // with 2 buckets bucket 0 keeps its own step
    Communicator& comm = ctx_.reduce_comm;
    BucketSteps& steps = ctx_.steps;
    // CPU: the task runs on the comm thread once the collective completed; CUDA: it runs now
    // and only enqueues the step kernel and the broadcast after the collective (communicator.h).
    Work work = comm.then([&comm, &steps, bucket, last, second_last, reordered,
                           second_last_steps_late, scalars](const ExecContext& stream) {
      if (bucket == second_last) {
        if (!second_last_steps_late) steps.step_bucket(bucket, scalars, stream, comm.name());
        return;  // the rest follows in the last bucket's task
      }
      steps.step_bucket(bucket, scalars, stream, comm.name());
      steps.broadcast_bucket(bucket, &stream);
      if (bucket != last || !reordered) return;
      if (second_last_steps_late) steps.step_bucket(second_last, scalars, stream, comm.name());
      steps.broadcast_bucket(second_last, &stream);
    });
    // The second-to-last bucket's broadcast Work is published by the last bucket's task.
    if (bucket == last && reordered) ctx_.steps.set_step_work(second_last, work);
    ctx_.steps.set_step_work(bucket, std::move(work));
  }

  StepVerdict finish_backward(const StepScalars& scalars, const StepLossFn& step_loss) override {
    // Steps and broadcasts were issued from the collectives' tasks; the verdict can only follow
    // them (a stop: docs/design.md, "Divergence"). The next forward's first layer waits for the
    // last bucket's broadcast anyway, which follows every collective.
    for (const auto& b : ctx_.plan.buckets) ctx_.steps.expect_broadcast(b.index);
    ctx_.reducer.stream_wait_all(ctx_.steps.compute());
    return check(scalars, step_loss);
  }
};

}  // namespace

StepVerdict StepPolicy::check(const StepScalars& scalars, const StepLossFn& step_loss) {
  // Checked per log window instead (never with clipping or a skip, which need the verdict here).
  if (ctx_.step_check == StepCheck::EveryLogWindow) return StepVerdict{};
  const double grad_sum_sq = ctx_.steps.local_grad_sum_sq(ctx_.reduce_comm.rank());
  const double mean_loss = step_loss() / static_cast<double>(ctx_.grad_accum);
  StepVerdict verdict =
      agree_on_step(mean_loss, grad_sum_sq, ctx_.grad_shares, ctx_.max_loss, ctx_.reduce_comm);
  ctx_.steps.set_last_grad_norm(std::sqrt(verdict.grad_sum_sq) *
                                static_cast<double>(scalars.grad_scale));
  return verdict;
}

StepScalars StepPolicy::clipped(const StepScalars& scalars, const StepVerdict& verdict) const {
  if (ctx_.clip_grad_norm <= 0.0f) return scalars;
  StepScalars s = scalars;
  s.grad_scale *=
      BucketSteps::clip_coefficient(ctx_.clip_grad_norm, verdict.grad_sum_sq, scalars.grad_scale);
  return s;
}

std::unique_ptr<StepPolicy> make_step_policy(StepSchedule schedule, PolicyContext ctx) {
  switch (schedule) {
    case StepSchedule::Ddp: return std::make_unique<DdpPolicy>(ctx);
    case StepSchedule::ZeroNone: return std::make_unique<ZeroNonePolicy>(ctx);
    case StepSchedule::ZeroAfterBackward: return std::make_unique<ZeroAfterBackwardPolicy>(ctx);
    case StepSchedule::ZeroInterleaved: return std::make_unique<ZeroInterleavedPolicy>(ctx);
  }
  ZL_CHECK(false, "unknown step schedule");
  return nullptr;
}

}  // namespace zl
