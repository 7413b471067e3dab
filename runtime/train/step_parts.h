// StepParts: the parts one rank's data-parallel step is made of, built once per Trainer - the
// reduce buffer, the Reducer (grad-ready hooks -> bucket collectives), BucketSteps (step,
// broadcast, per-layer wait) and the mode's Schedule (when those run). They are called, in the
// order one step runs, by Trainer::train_step (runtime/train/train_step.cpp).
#pragma once

#include <memory>
#include <span>

#include "models/parameter_store.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/bucket_steps.h"
#include "runtime/train/mode_plan.h"
#include "runtime/train/parameter_gather.h"
#include "runtime/train/reduce_buffer.h"
#include "runtime/train/reducer.h"
#include "runtime/train/schedule.h"
#include "runtime/train/sharded_optimizer.h"
#include "runtime/train/step_observer.h"
#include "runtime/train/step_options.h"

namespace zl {

class Tracer;

struct StepParts {
  // Every reference must outlive the parts.
  // `initial_fp32`: Model::initial_parameters(), for stage 3's shards (parameter_gather.h).
  StepParts(const ModePlan& mode, const StepOptions& options, const BucketPlan& plan,
            ParameterStore& store, ShardedOptimizer& optimizer, Communicator& reduce_comm,
            Communicator& broadcast_comm, ExecContext compute, Tracer* tracer,
            std::span<const float> initial_fp32 = {});

  // Rank 0's initial parameters to every rank (blocking), before the first step.
  void broadcast_initial_parameters();
  // Waits until every collective, step and broadcast issued so far completed.
  void synchronize();
  // Tests: events of each step in the order they happen (null: none).
  void set_observer(StepObserver* observer);

  ParameterStore& store;
  Communicator& reduce_comm;
  Communicator& broadcast_comm;
  ExecContext compute;
  ReduceBuffer reduce_buffer;  // before the reducer and the buckets, which use it
  Reducer reducer;
  BucketSteps buckets;
  std::unique_ptr<Schedule> schedule;
  std::unique_ptr<ParameterGather> gather;  // ZeRO stage 3 only (on the broadcast communicator)
};

}  // namespace zl
