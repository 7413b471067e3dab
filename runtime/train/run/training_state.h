// TrainingState: a plain view of what a checkpoint saves and restores - parameters, optimizer
// state, bucket plan and mode, the run's position - with the facts it records next to them. It
// lets runtime/checkpoint read and restore a run without depending on the Trainer (which owns all
// of it; Trainer::state() hands out the view after waiting for in-flight work).
#pragma once

#include <cstdint>

#include "models/parameter_store.h"
#include "runtime/comm/world.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/rank_optimizer.h"

namespace zl {

class Tracer;

// Where a run is: optimizer steps completed and the sampler position (micro-batches consumed or
// skipped, Note [Epochs and accumulation] in trainer.h).
struct TrainingPosition {
  std::int64_t step = 0;
  std::int64_t cursor = 0;
};

// The optimizer steps from sampler position `cursor` until `epochs` passes over the data are done
// (0 once they are): the rest of the current epoch, whose last partial step is skipped, then
// whole epochs (Note [Epochs and accumulation] in trainer.h). From a resume on another world size
// the cursor is another global batch's, so the run's length is this, not epochs x steps per epoch.
inline std::int64_t steps_left_in_epochs(std::int64_t cursor, std::int64_t batches_per_epoch,
                                         std::int64_t grad_accum, std::int64_t epochs) {
  const std::int64_t epoch = cursor / batches_per_epoch;
  if (epoch >= epochs) return 0;
  const std::int64_t in_this_epoch = (batches_per_epoch - cursor % batches_per_epoch) / grad_accum;
  return in_this_epoch + (epochs - epoch - 1) * (batches_per_epoch / grad_accum);
}

struct TrainingState {
  const Config& config;
  const World& world;
  ParameterStore& store;
  RankOptimizer& optimizer;
  const BucketPlan& plan;
  const ModePlan& mode;
  TrainingPosition& position;  // a load sets it
  // The step of the checkpoint this run resumed from, -1 when it started fresh (a load sets it):
  // pruning keeps that checkpoint until the run ends (docs/design.md, "Divergence").
  std::int64_t& resumed_step;
  // The run's optimizer steps; with train.epochs a load sets it (steps_left_in_epochs).
  std::int64_t& total_steps;
  std::int64_t batches_per_epoch = 0;  // micro-batches (global batches of the sampler) per epoch
  Tracer* tracer = nullptr;            // nullable
  bool quiet = false;                  // no progress lines
};

}  // namespace zl
