// The schedules (see schedule.h; ddp runs zero/none's): each only orders the shared primitives.
#include "runtime/train/step/schedule.h"

#include <cmath>
#include <utility>

#include "base/errors.h"

namespace zl {
namespace {

// torch.nn.utils.clip_grad_norm_'s coefficient for max norm `max_norm` (> 0) from the global sum
// of squares of the reduced gradients scaled by `grad_scale` (the average over ranks and
// micro-batches): max_norm / (norm + 1e-6) when that is below 1.
float clip_coefficient(float max_norm, double grad_sum_sq, float grad_scale) {
  const double norm = std::sqrt(grad_sum_sq) * static_cast<double>(grad_scale);
  const double coef = static_cast<double>(max_norm) / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

// Also ddp's: there every rank owns every bucket, and nothing is published (or skipped).
class ZeroNoneSchedule final : public Schedule {
 public:
  using Schedule::Schedule;
  StepVerdict after_backward(const StepScalars& scalars, const StepLossFn& step_loss) override {
    const StepVerdict verdict = check_before_steps(scalars, step_loss);
    if (!verdict.finite) return verdict;  // every rank keeps its parameters
    const StepScalars s = clipped(scalars, verdict);
    BucketOps& buckets = parts_.buckets;
    for (const auto& b : parts_.step.plan.buckets) {
      if (buckets.owns(b.index)) {
        buckets.step_bucket(b.index, s, parts_.step.compute, StepStream::Compute);
      }
    }
    if (!buckets.publishes()) return verdict;  // stage 3: the next forward gathers
    for (const auto& b : parts_.step.plan.buckets) buckets.publish(b.index);
    buckets.wait_publishes();
    return verdict;
  }
};

class ZeroAfterBackwardSchedule final : public Schedule {
 public:
  using Schedule::Schedule;
  StepVerdict after_backward(const StepScalars& scalars, const StepLossFn& step_loss) override {
    // The norm needs every bucket reduced before the first step, and so does a skip; a stop can
    // be decided after the steps were issued, which keeps steps overlapping later collectives.
    const bool verdict_first = parts_.options.clip_grad_norm > 0.0f ||
                               parts_.options.on_nonfinite == OnNonfinite::SkipStep;
    StepVerdict verdict;
    if (verdict_first) {
      verdict = check_before_steps(scalars, step_loss);
      if (!verdict.finite) return verdict;
    }
    const StepScalars s = clipped(scalars, verdict);
    BucketOps& buckets = parts_.buckets;
    for (const auto& b : parts_.step.plan.buckets) {
      // A stream wait (host wait on the CPU): on CUDA the step kernel on the compute stream
      // follows this bucket's collective and the host goes on issuing the next bucket.
      parts_.reducer.collective(b.index).stream_wait(parts_.step.compute);
      if (buckets.owns(b.index)) {
        buckets.step_bucket(b.index, s, parts_.step.compute, StepStream::Compute);
      }
      if (buckets.publishes()) buckets.publish(b.index);
      buckets.forward_waits_for(b.index);
    }
    return verdict_first ? verdict : check(scalars, step_loss);
  }
};

class ZeroInterleavedSchedule final : public Schedule {
 public:
  using Schedule::Schedule;

  // Runs on the reduce stream after this bucket's collective (and all earlier ones) - with hybrid
  // sharding on the replica stream after its all-reduce across the replicas (Note [Replica
  // all-reduce]): step the bucket right there, then start its broadcast (Note [Two
  // communicators] in reducer.h); the last two buckets are the exception below.
  //
  // Note [Tail broadcast order]: the last bucket (the first layers) is final only when backward
  // ends, and the next forward needs its parameters first. In bucket order, the second-to-last
  // bucket's step holds the reduce stream and its broadcast holds the link while the last
  // bucket waits to be reduced, and the last broadcast then queues behind it: the forward
  // waits for all of it. So the second-to-last bucket's continuation does not broadcast, and
  // the last bucket's continuation steps and broadcasts the last bucket, then steps (with 3+
  // buckets) and broadcasts the second-to-last: the last collective starts as soon as backward
  // ends, and the second-to-last bucket's step and transfer overlap the next forward's first
  // layers (which wait per bucket, BucketOps::wait_for_bucket). Critical path first, as in
  // priority-based parameter propagation. With 2 buckets only the broadcasts swap: bucket 0 is
  // still stepped before bucket 1's collective completes, which is what interleaved means. The
  // order is fixed, so every rank issues the same sequence on each communicator. What it hides
  // on a modelled link: docs/bench.md ("What it took to hide communication on 2 cores").
  void after_collective_started(int bucket, const StepScalars& scalars) override {
    const int count = static_cast<int>(parts_.step.plan.buckets.size());
    const int last = count - 1;
    const int second_last = last - 1;  // -1 with a single bucket: nothing is reordered
    Communicator& comm = parts_.reducer.reduced_on();
    BucketOps& buckets = parts_.buckets;
    // CPU: the continuation runs on the comm thread once the collective completed; CUDA: it runs
    // now and only enqueues the step kernel and the broadcast after the collective
    // (communicator.h).
    Work task;
    const auto step = [&buckets, scalars](int b, const ExecContext& stream) {
      if (buckets.owns(b)) buckets.step_bucket(b, scalars, stream, StepStream::Reduce);
    };
    const auto publish = [&buckets](int b, const ExecContext& stream) {
      if (buckets.publishes()) buckets.publish(b, &stream);
    };
    if (bucket == second_last) {
      task = comm.then([step, bucket, count](const ExecContext& stream) {
        // With 2 buckets it keeps its own step; its publish follows the last bucket's.
        if (count == 2) step(bucket, stream);
      });
    } else if (bucket == last && second_last >= 0) {
      task = comm.then([step, publish, last, second_last, count](const ExecContext& stream) {
        step(last, stream);
        publish(last, stream);
        if (count >= 3) step(second_last, stream);
        publish(second_last, stream);
      });
      // The second-to-last bucket's publish Work is written by this continuation.
      buckets.set_interleaved_task(second_last, task);
    } else {
      task = comm.then([step, publish, bucket](const ExecContext& stream) {
        step(bucket, stream);
        publish(bucket, stream);
      });
    }
    buckets.set_interleaved_task(bucket, std::move(task));
  }

  StepVerdict after_backward(const StepScalars& scalars, const StepLossFn& step_loss) override {
    // Steps and broadcasts were issued from the collectives' continuations; the verdict can only
    // follow them (a stop: docs/design.md, "Divergence"). The next forward's first layer waits
    // for the last bucket's broadcast anyway, which follows every collective.
    for (const auto& b : parts_.step.plan.buckets) parts_.buckets.forward_waits_for(b.index);
    parts_.reducer.wait_collectives(parts_.step.compute);
    return check(scalars, step_loss);
  }
};

}  // namespace

StepVerdict Schedule::check(const StepScalars& scalars, const StepLossFn& step_loss) {
  // Checked per log window instead (never with clipping or a skip, which need the verdict here).
  if (parts_.options.step_check == StepCheck::EveryLogWindow) return StepVerdict{};
  const double grad_sum_sq = parts_.buckets.local_grad_sum_sq(parts_.every_rank.rank());
  const double mean_loss = step_loss() / static_cast<double>(parts_.options.grad_accum);
  const StepContext& step = parts_.step;
  const GradShares shares = step.mode.sharded_state ? GradShares::Sharded : GradShares::Replicated;
  StepVerdict verdict = agree_on_step(mean_loss, grad_sum_sq, shares, step.plan.world_size,
                                      parts_.options.max_loss, parts_.every_rank);
  last_grad_norm_ = std::sqrt(verdict.grad_sum_sq) * static_cast<double>(scalars.grad_scale);
  return verdict;
}

StepVerdict Schedule::check_before_steps(const StepScalars& scalars,
                                         const StepLossFn& step_loss) {
  parts_.reducer.wait_collectives(parts_.step.compute);
  const StepVerdict verdict = check(scalars, step_loss);
  if (!verdict.finite) parts_.buckets.skip_publishes();
  return verdict;
}

StepScalars Schedule::clipped(const StepScalars& scalars, const StepVerdict& verdict) const {
  if (parts_.options.clip_grad_norm <= 0.0f) return scalars;
  StepScalars s = scalars;
  s.grad_scale *=
      clip_coefficient(parts_.options.clip_grad_norm, verdict.grad_sum_sq, scalars.grad_scale);
  return s;
}

std::unique_ptr<Schedule> make_schedule(ScheduleParts parts) {
  switch (parts.step.mode.schedule) {
    case ScheduleKind::Ddp:
    case ScheduleKind::ZeroNone: return std::make_unique<ZeroNoneSchedule>(parts);
    case ScheduleKind::ZeroAfterBackward: return std::make_unique<ZeroAfterBackwardSchedule>(parts);
    case ScheduleKind::ZeroInterleaved: return std::make_unique<ZeroInterleavedSchedule>(parts);
  }
  ZL_CHECK(false, "unknown schedule");
  return nullptr;
}

}  // namespace zl
