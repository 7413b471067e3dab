// The gradient reducer: counts grad-ready hooks per bucket and, once every gradient of a bucket
// is final, starts the bucket's collective (ModePlan::bucket_collective: all-reduce, reduce to
// the assigned rank, or reduce-scatter into every rank's shard; in ModePlan::reduce_dtype,
// gradient_store.h) on the reduce communicator, in bucket index order (Note [Bucket order]), one
// Work per bucket. It only reduces: the step hands each started bucket to the mode's schedule
// right after its collective (train_step.cpp).
//
// Note [Two communicators]: bucket collectives are issued by the main thread in bucket order on
// the reduce communicator; broadcasts go on the broadcast communicator, issued in bucket order too
// - by the main thread, or in interleaved mode by the reduce stream's continuations, which run in
// completion = issue order. So each communicator sees the same sequence on every rank
// (docs/design.md invariant 1) even though broadcasts are issued from another thread at
// timing-dependent moments.
#pragma once

#include <optional>
#include <vector>

#include "base/exec_context.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/collective_program.h"
#include "runtime/train/gradient_store.h"
#include "runtime/train/step_observer.h"

namespace zl {

class Tracer;

// Which backward of a step is running: micro-batch `index` of `count` (train.grad_accum).
struct MicroBatch {
  std::int64_t index = 0, count = 1;
  bool first() const { return index == 0; }
  bool last() const { return index + 1 == count; }
};

class Reducer {
 public:
  // `buffer`: what each bucket's collective (ModePlan::bucket_collective) runs on (fp32 gradients
  // in place, their bf16 cast, made on `compute` right before the collective, or stage 2's pool
  // buffers). Each collective is checked against `program` (Note [Collective program]).
  Reducer(const ModePlan& mode, const BucketPlan& plan, GradientStore& buffer, Communicator& comm,
          ProgramCheck& program, ExecContext compute, Tracer* tracer);

  void set_observer(StepObserver* observer) { observer_ = observer; }

  // A backward begins, micro-batch `micro` of the step: in the final one (every one with stage
  // 2's gradient pool, which reduce-scatters every micro-batch into the shard) every bucket waits
  // for all of its parameters' grad-ready hooks. Outside those gradient_ready does nothing (the
  // earlier micro-batches of gradient accumulation).
  void begin_backward(MicroBatch micro);
  // How this backward writes parameter gradients: the step's first micro-batch overwrites, the
  // later ones add (local accumulation); stage 2 always overwrites its pool buffers.
  Accumulate backward_accumulate(MicroBatch micro) const;
  // Whether the backward running is the step's final one (its collectives are the step's).
  bool in_final_backward() const { return active_ && final_; }
  // Backward's grad-ready hook calls this once per parameter, when its gradient is final.
  void gradient_ready(int param_id);
  // Starts the collective of the next bucket in index order when all its gradients are final,
  // and returns it; nullopt when that bucket is not complete yet (or outside a reducing
  // backward). Called until nullopt after each gradient_ready, the buckets start in index order
  // on every rank even where backward finishes them out of order.
  std::optional<int> start_next_collective();
  // Ends the backward; in a reducing one a bucket whose collective did not start (a parameter
  // without a gradient) is an InternalError.
  void end_backward();

  // The Work of bucket b's collective (complete after the collective, and after the observer's
  // or tracer's task that follows it on the stream).
  const Work& collective(int bucket) const { return work_[static_cast<std::size_t>(bucket)]; }
  // Orders `exec` after every bucket's collective (CPU: blocks until they completed; CUDA: the
  // stream waits for their events and the host moves on).
  void wait_collectives(const ExecContext& exec) const;

 private:
  const BucketPlan& plan_;
  GradientStore& buffer_;
  Communicator& comm_;
  ProgramCheck& program_;
  CollectiveOp op_;
  bool pools_;  // stages 2 and 3: every micro-batch reduces (Note [Gradient pool])
  ExecContext compute_;
  Tracer* tracer_;
  StepObserver* observer_ = nullptr;

  bool active_ = false;  // in a backward that reduces
  bool final_ = false;   // ... and it is the step's final one
  int micro_ = 0;        // the backward's micro-batch
  std::vector<int> pending_;  // per bucket: gradients not yet final in this backward
  int next_ = 0;              // the next bucket to start (index order)
  std::vector<Work> work_;
};

}  // namespace zl
