// The Reducer: turns grad-ready hooks into per-bucket collectives while backward runs, and runs
// the optimizer step of the configured mode. The modes differ only in *when* they call three
// shared primitives — launch_collective(b), step_bucket(b), broadcast_bucket(b):
//
//   ddp                 collective = all-reduce; after backward every rank steps every bucket.
//   zero/none           after backward: step owned buckets, broadcast all, wait for the broadcasts.
//   zero/after_backward after backward: for b in order, wait for b's collective, step if owned,
//                       broadcast; the next forward waits per layer for its bucket's broadcast.
//   zero/interleaved    b's step and broadcast run in the completion callback of b's collective
//                       on the reduce comm thread/stream, while backward continues.
//
// Note [Two communicators]: bucket collectives (all-reduce or reduce) are issued by the main thread
// in bucket order on `reduce_comm`; broadcasts go on `broadcast_comm`, issued in bucket order too —
// by the main thread, or in interleaved mode by the reduce stream's callbacks, which run in
// completion = issue order. So each communicator sees the same sequence on every rank (invariant
// 1) even though broadcasts are issued from another thread at timing-dependent moments.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "models/parameter_store.h"
#include "models/tape.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/train/sharded_optimizer.h"

namespace zl {

class Tracer;

// What happened in one step, for the bench and tests.
struct StepEvent {
  enum class Kind { CollectiveLaunched, CollectiveDone, StepBegin, StepEnd, BroadcastLaunched };
  Kind kind;
  int bucket;
};

class Reducer {
 public:
  Reducer(const ParallelConfig& parallel, float clip_grad_norm, std::int64_t grad_accum,
          const BucketPlan& plan, ParameterStore& store, ShardedOptimizer& optimizer,
          Communicator& reduce_comm, Communicator& broadcast_comm, ExecContext compute,
          Tracer* tracer);

  // Rank 0's initial parameters to every rank (blocking), before the first step.
  void broadcast_initial_parameters();

  // Before each micro-batch's backward (0 .. grad_accum-1). Collectives are launched only in the
  // last one (grad_accum > 1 accumulates locally first), which also fixes the step's scalars.
  void begin_backward(std::int64_t micro_batch);
  // Gradient accumulation mode for this micro-batch's backward (= on the first, += after).
  Accumulate accumulate_mode() const { return micro_batch_ == 0 ? Accumulate::Overwrite : Accumulate::Add; }

  // The hooks handed to backward and forward.
  void on_grad_ready(int param_id);
  void before_param_use(int param_id);
  const GradReadyHook& grad_ready_hook() const { return grad_ready_hook_; }
  const ParamUseHook& param_use_hook() const { return param_use_hook_; }

  // After the last micro-batch's backward: the mode's optimizer policy. On return the step is
  // issued; in none/ddp it is also complete.
  void finish_backward();

  // Waits until every collective, step and broadcast issued so far completed (before eval,
  // checkpoints, reading parameters).
  void synchronize();

  // Event recording for tests (ordering of steps vs collectives). Off by default.
  void record_events(bool on) { record_events_ = on; }
  std::vector<StepEvent> take_events();

  double last_grad_norm() const { return last_grad_norm_; }

 private:
  void launch_collective(int bucket);
  void step_bucket(int bucket, const StepScalars& scalars, const ExecContext& exec,
                   const std::string& trace_thread);
  void broadcast_bucket(int bucket);
  void wait_collectives();
  float clip_coefficient();  // reads the reduced gradients; may issue a scalar all-reduce
  StepScalars clipped_scalars();  // this step's scalars with the clip coefficient applied
  void note(StepEvent::Kind kind, int bucket);
  bool is_zero() const { return parallel_.mode == ParallelMode::Zero; }

  ParallelConfig parallel_;
  float clip_grad_norm_;
  std::int64_t grad_accum_;
  const BucketPlan& plan_;
  ParameterStore& store_;
  ShardedOptimizer& optimizer_;
  Communicator& reduce_comm_;
  Communicator& broadcast_comm_;
  ExecContext compute_;
  Tracer* tracer_;

  GradReadyHook grad_ready_hook_;
  ParamUseHook param_use_hook_;

  std::int64_t micro_batch_ = 0;   // index within the current step
  bool sync_this_backward_ = false;
  StepScalars scalars_;
  std::vector<int> pending_grads_;  // per bucket: gradients not yet final in this backward
  int next_to_launch_ = 0;          // buckets are launched in index order (Note [Bucket order])
  std::vector<Work> collective_work_;
  std::vector<Work> step_work_;      // interleaved: the callback that steps and broadcasts
  std::vector<Work> broadcast_work_;
  std::vector<char> awaiting_broadcast_;  // main thread: forward must wait for this bucket
  double last_grad_norm_ = 0.0;

  bool record_events_ = false;
  std::mutex events_mutex_;
  std::vector<StepEvent> events_;
};

}  // namespace zl
