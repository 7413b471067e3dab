// StepParts: the parts one rank's data-parallel step is made of, each chosen once from the
// ModePlan - the collective program's check, the gradient store (fp32, bf16 wire or stage 2's
// pool), the Reducer (grad-ready hooks -> bucket collectives), BucketOps (step, publish,
// per-layer wait, norm), the mode's Schedule (when those run) and, where the parameters are
// gathered (stage 3), the ParameterGather. They are called, in the order one step runs, by
// Trainer::train_step (runtime/train/run/train_step.cpp).
#pragma once

#include <memory>

#include "base/errors.h"
#include "models/parameter_store.h"
#include "runtime/comm/communicator.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/step/bucket_ops.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/parameter_gather.h"
#include "runtime/train/step/gradient_store.h"
#include "runtime/train/step/reducer.h"
#include "runtime/train/step/schedule.h"
#include "runtime/train/step/rank_optimizer.h"
#include "runtime/train/step/step_context.h"
#include "runtime/train/step/step_options.h"

namespace zl {

// The communicators one rank's step issues on (runtime/train/run/trainer_setup.cpp builds them).
// With hybrid sharding reduce and broadcast span the rank's shard group
// (Note [Replica all-reduce]).
struct StepComms {
  Communicator& reduce;     // the gradients' collectives, in bucket order
  Communicator& broadcast;  // publishes after the step, stage 3's gathers
  Communicator* replica = nullptr;  // hybrid sharding: each shard's all-reduce across the groups
  Communicator* world = nullptr;    // every rank, where `reduce` does not span them (hybrid)
  // Every rank of the job: the step's verdict, metrics, evaluation.
  Communicator& every_rank() const { return world ? *world : reduce; }
};

struct StepParts {
  // Every reference must outlive the parts. `shards`: stage 3's parameters, which the optimizer
  // was built with (parameter_gather.h); null in every other mode.
  StepParts(const ModePlan& mode, const StepOptions& options, const BucketPlan& plan,
            ParameterStore& store, RankOptimizer& optimizer, const StepComms& comms,
            ExecContext compute, Tracer* tracer, const ParameterShards* shards = nullptr);

  // Rank 0's initial parameters to every rank (blocking), before the first step.
  void broadcast_initial_parameters();
  // Waits until every collective, step and broadcast issued so far completed.
  void synchronize();
  // The stage-3 gather (ModePlan::gathers_parameters; an InternalError in other modes).
  ParameterGather& gather() const {
    ZL_CHECK(context.mode.gathers_parameters(), "{} gathers no parameters", context.mode.name());
    return *gather_;
  }
  // Tests: events of each step in the order they happen (null: none).
  void set_observer(StepObserver* observer) { context.observer = observer; }

  StepComms comms;
  ProgramCheck program;  // collective_program(mode, plan), checked by the three below
  StepContext context;   // what the parts below read: plans, store, program, compute, tracer
  GradientStore gradients;  // before the reducer and the buckets, which use it
  Reducer reducer;
  BucketOps buckets;
  std::unique_ptr<Schedule> schedule;
  // Stage 3 only (ModePlan::gathers_parameters; on the broadcast communicator): gather().
  std::unique_ptr<ParameterGather> gather_;
};

}  // namespace zl
