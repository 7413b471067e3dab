// The gradient reducer: counts grad-ready hooks per bucket and, once every gradient of a bucket
// is final, issues the bucket's collective (ModePlan::bucket_collective: all-reduce, reduce to
// the assigned rank, or reduce-scatter into every rank's shard; in ModePlan::reduce_dtype,
// gradient_wire.h) on the reduce communicator, in
// bucket index order (Note [Bucket order]), one Work per bucket. It only reduces: what follows a bucket's collective (step, broadcast) is the
// step policy's (step_policy.h), told through the issued hook.
//
// Note [Two communicators]: bucket collectives are issued by the main thread in bucket order on
// the reduce communicator; broadcasts go on the broadcast communicator, issued in bucket order too
// - by the main thread, or in interleaved mode by the reduce stream's callbacks, which run in
// completion = issue order. So each communicator sees the same sequence on every rank
// (docs/design.md invariant 1) even though broadcasts are issued from another thread at
// timing-dependent moments.
#pragma once

#include <functional>
#include <vector>

#include "base/exec_context.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/gradient_wire.h"
#include "runtime/train/step_observer.h"

namespace zl {

class Tracer;

class Reducer {
 public:
  // Called on the main thread right after bucket b's collective was issued.
  using IssuedHook = std::function<void(int bucket)>;

  // `wire`: the buffer each bucket's collective runs on (fp32 gradients in place, or their bf16
  // cast, made on `compute` right before the collective).
  Reducer(const BucketPlan& plan, GradientWire& wire, Communicator& comm,
          CollectiveOp bucket_collective, ExecContext compute, Tracer* tracer);

  void set_issued_hook(IssuedHook hook) { issued_ = std::move(hook); }
  void set_observer(StepObserver* observer) { observer_ = observer; }

  // A backward whose gradients are final for this step begins: every bucket waits for all of its
  // parameters' grad-ready hooks. Outside an armed backward on_grad_ready does nothing (the
  // earlier micro-batches of gradient accumulation).
  void arm();
  // The grad-ready hook (backward calls it once per parameter, when its gradient is final).
  void on_grad_ready(int param_id);
  // Ends the armed backward; a bucket left unlaunched (a parameter without a gradient) is an error.
  void disarm();

  // The Work of bucket b's last collective (complete after the collective, and after the
  // observer's or tracer's task that follows it on the stream).
  const Work& work(int bucket) const { return work_[static_cast<std::size_t>(bucket)]; }
  // Orders `exec` after every bucket's collective (CPU: blocks until they completed; CUDA: the
  // stream waits for their events and the host moves on).
  void stream_wait_all(const ExecContext& exec) const;

 private:
  void launch(int bucket);

  const BucketPlan& plan_;
  GradientWire& wire_;
  Communicator& comm_;
  CollectiveOp op_;
  ExecContext compute_;
  Tracer* tracer_;
  StepObserver* observer_ = nullptr;
  IssuedHook issued_;

  bool armed_ = false;
  std::vector<int> pending_;  // per bucket: gradients not yet final in this backward
  int next_ = 0;              // the next bucket to launch (index order)
  std::vector<Work> work_;
};

}  // namespace zl
