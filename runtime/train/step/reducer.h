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
//
// Note [Replica all-reduce]: with hybrid sharding (parallel.shard_group = G below the world) the
// reduce communicator spans one group of G ranks, and the reduce-scatter leaves each rank the
// group's sum of its shard. The shard's replicas - the ranks with the same member index in the
// other groups - then all-reduce it on the replica communicator, once per step (the final
// micro-batch; stages 2 and 3 first accumulate every micro-batch inside the group), so every
// rank holds the sum over the whole world and one gradient scale of 1 / (world x grad_accum)
// averages it. The main thread issues those all-reduces in bucket order right after each
// bucket's reduce-scatter, as it issues the reduce-scatters: the replica stream first waits for
// the group's reduction of that bucket (a continuation that waits for its Work: the comm thread
// blocks on the CPU, where the replica stream has nothing else to do first; an event wait on
// CUDA), then all-reduces. So each of the three communicators sees one sequence in one order on
// every member (invariant 1), the group's reduce-scatter of bucket b + 1 overlaps the replicas'
// all-reduce of bucket b, and the bucket's reduction completes on the replica stream, where an
// interleaved step follows it. With a bf16 wire at stages 2 and 3 the accumulated fp32 shard is
// cast to bf16 for the all-reduce and back (exact both ways but the sum's rounding, as stage 1's
// in-place bf16 all-reduce), on the replica stream in one buffer (the stream runs one at a time).
#pragma once

#include <optional>
#include <vector>

#include "base/exec_context.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/step/gradient_store.h"
#include "runtime/train/step/step_context.h"

namespace zl {

// Which backward of a step is running: micro-batch `index` of `count` (train.grad_accum).
struct MicroBatch {
  std::int64_t index = 0, count = 1;
  bool first() const { return index == 0; }
  bool last() const { return index + 1 == count; }
};

class Reducer {
 public:
  // `buffer`: what each bucket's collective (ModePlan::bucket_collective) runs on (fp32 gradients
  // in place, their bf16 cast, made on the compute stream right before the collective, or stage
  // 2's pool buffers). Each collective is checked against the step's program (Note [Collective
  // program]). `replica`: hybrid sharding's replica communicator (Note [Replica all-reduce]);
  // null when flat.
  Reducer(const StepContext& step, GradientStore& buffer, Communicator& comm,
          Communicator* replica);

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

  // Where a bucket's reduction completes: the reduce communicator, or the replica one.
  Communicator& reduced_on() const { return replica_ ? *replica_ : comm_; }
  // The Work of bucket b's reduction (complete after its collective, its replicas' all-reduce,
  // and the observer's or tracer's task that follows them on the stream).
  const Work& collective(int bucket) const { return work_[static_cast<std::size_t>(bucket)]; }
  // Orders `exec` after every bucket's collective (CPU: blocks until they completed; CUDA: the
  // stream waits for their events and the host moves on).
  void wait_collectives(const ExecContext& exec) const {
    for (const auto& w : work_) w.stream_wait(exec);
  }

 private:
  // Hybrid sharding: bucket b's reduced shard summed with its replicas' after `in_group`.
  Work reduce_across_replicas(const Bucket& b, Work in_group);

  const StepContext& step_;
  GradientStore& buffer_;
  Communicator& comm_;
  Communicator* replica_;
  CollectiveOp op_;

  bool active_ = false;  // in a backward that reduces
  bool final_ = false;   // ... and it is the step's final one
  int micro_ = 0;        // the backward's micro-batch
  std::vector<int> pending_;  // per bucket: gradients not yet final in this backward
  int next_ = 0;              // the next bucket to start (index order)
  std::vector<Work> work_;
};

}  // namespace zl
