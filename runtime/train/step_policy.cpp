// The four step policies (see step_policy.h); each is only an order of the shared primitives.
#include "runtime/train/step_policy.h"

#include <string>
#include <utility>

#include "base/errors.h"

namespace zl {
namespace {

const std::string kMainThread = "main";

class DdpPolicy final : public StepPolicy {
 public:
  using StepPolicy::StepPolicy;
  void finish_backward(const StepScalars& scalars) override {
    ctx_.reducer.stream_wait_all(ctx_.steps.compute());
    const StepScalars s = clipped(scalars);
    for (const auto& b : ctx_.plan.buckets) {
      ctx_.steps.step_bucket(b.index, s, ctx_.steps.compute(), kMainThread);
    }
  }
};

class ZeroNonePolicy final : public StepPolicy {
 public:
  using StepPolicy::StepPolicy;
  void finish_backward(const StepScalars& scalars) override {
    ctx_.reducer.stream_wait_all(ctx_.steps.compute());
    const StepScalars s = clipped(scalars);
    for (const auto& b : ctx_.plan.buckets) {
      ctx_.steps.step_bucket(b.index, s, ctx_.steps.compute(), kMainThread);
    }
    for (const auto& b : ctx_.plan.buckets) ctx_.steps.broadcast_bucket(b.index);
    ctx_.steps.wait_broadcasts();
  }
};

class ZeroAfterBackwardPolicy final : public StepPolicy {
 public:
  using StepPolicy::StepPolicy;
  void finish_backward(const StepScalars& scalars) override {
    // The norm needs every bucket reduced before the first step.
    if (ctx_.clip_grad_norm > 0.0f) ctx_.reducer.stream_wait_all(ctx_.steps.compute());
    const StepScalars s = clipped(scalars);
    for (const auto& b : ctx_.plan.buckets) {
      // A stream wait (host wait on the CPU): on CUDA the step kernel on the compute stream
      // follows this bucket's collective and the host goes on issuing the next bucket.
      ctx_.reducer.work(b.index).stream_wait(ctx_.steps.compute());
      ctx_.steps.step_bucket(b.index, s, ctx_.steps.compute(), kMainThread);
      ctx_.steps.broadcast_bucket(b.index);
      ctx_.steps.expect_broadcast(b.index);
    }
  }
};

class ZeroInterleavedPolicy final : public StepPolicy {
 public:
  explicit ZeroInterleavedPolicy(PolicyContext ctx) : StepPolicy(ctx) {
    ZL_CHECK(ctx.clip_grad_norm <= 0.0f,
             "interleaved overlap cannot clip (rejected at config time)");
  }
  void on_collective_issued(int bucket, const StepScalars& scalars) override {
    // Runs on the reduce stream after this bucket's collective (and all earlier ones): step the
    // bucket right there, then issue its broadcast (Note [Two communicators] in reducer.h).
    Communicator& comm = ctx_.reduce_comm;
    BucketSteps& steps = ctx_.steps;
    // CPU: the task runs on the comm thread once the collective completed; CUDA: it runs now
    // and only enqueues the step kernel and the broadcast after the collective (communicator.h).
    Work work = comm.then([&comm, &steps, bucket, scalars](const ExecContext& stream) {
      steps.step_bucket(bucket, scalars, stream, comm.name());
      steps.broadcast_bucket(bucket, &stream);
    });
    ctx_.steps.set_step_work(bucket, std::move(work));
  }
  void finish_backward(const StepScalars&) override {
    // Steps and broadcasts were issued from the collectives' tasks.
    for (const auto& b : ctx_.plan.buckets) ctx_.steps.expect_broadcast(b.index);
  }
};

}  // namespace

StepScalars StepPolicy::clipped(const StepScalars& scalars) {
  if (ctx_.clip_grad_norm <= 0.0f) return scalars;
  StepScalars s = scalars;
  s.grad_scale *= ctx_.steps.clip_coefficient(ctx_.clip_grad_norm, scalars.grad_scale,
                                              ctx_.reduce_comm);
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
