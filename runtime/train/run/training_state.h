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
  std::int64_t total_steps = 0;
  std::int64_t batches_per_epoch = 0;  // micro-batches (global batches of the sampler) per epoch
  Tracer* tracer = nullptr;            // nullable
  bool quiet = false;                  // no progress lines
};

}  // namespace zl
