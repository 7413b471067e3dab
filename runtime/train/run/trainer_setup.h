// TrainerSetup: everything a Trainer is built from, built in the same order on every rank (each
// step of it may be a collective): the device and its compute context, the ranks' agreement on
// config and data, the datasets, the memory check, the model and sampler, the run's step counts,
// and the communicators with the modelled link and the caller's wrapper (two; with hybrid
// sharding four).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "base/exec_context.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "models/model.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/backends/device.h"
#include "runtime/comm/world.h"
#include "runtime/config/config.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/step_parts.h"
#include "runtime/train/step/step_verdict.h"

namespace zl {

struct TrainerOptions {
  bool quiet = false;         // no progress lines (tests)
  bool write_outputs = true;  // the metrics file
  // Applied to each communicator after the [link] model (the bench wraps them in a
  // ComputeOnlyCommunicator to time a mode without communication). Empty: none.
  std::function<std::unique_ptr<Communicator>(std::unique_ptr<Communicator>)> wrap_comm;
  // Tests: when steps are checked for non-finite values; unset: as the config and device say
  // (docs/design.md, "Divergence").
  std::optional<StepCheck> step_check;
};

// What a training run of `mode` on `world` real ranks cannot do, as UserError naming the keys
// (exit 2): the link.ranks timing study (shard_study.h) with checkpoint.dir (its parameters are
// not trained), or on `device` CUDA (its link model times the study on the host only).
void check_trainable(const Config& config, const ModePlan& mode, int world, DeviceKind device);

struct TrainerSetup {
  // Collective over `world`. A UserError (bad data, a model that does not fit, ranks that
  // disagree) ends every rank before any communicator is built.
  TrainerSetup(const Config& config, const World& world, const TrainerOptions& options);

  Device device;        // before everything that lives on it
  ExecContext compute;  // the run's compute context: timeout, CPU threads, GEMM math
  ModePlan mode;        // derived once from the config
  int ranks = 1;  // the layout and the step's (planned_ranks: link.ranks in its timing study)
  DatasetSplits data;
  std::unique_ptr<Model> model;
  BucketPlan plan;  // the mode's buckets over the model's layout (plan_layout)
  std::unique_ptr<DistributedSampler> sampler;
  std::int64_t steps_per_epoch = 0;  // optimizer steps (Note [Epochs and accumulation])
  std::int64_t total_steps = 0;
  // The gradients' and the publishes' communicators: every rank, or with hybrid sharding the
  // rank's shard group; then the replica communicator (the same member of every group) and one of
  // every rank (the verdict, metrics, evaluation), hybrid sharding only.
  std::unique_ptr<Communicator> reduce_comm, broadcast_comm, replica_comm, world_comm;
  StepComms comms() const {
    return StepComms{*reduce_comm, *broadcast_comm, replica_comm.get(), world_comm.get()};
  }
  // Where steps are checked for non-finite values (options.step_check, else by device and config).
  StepCheck step_check = StepCheck::EveryStep;
};

}  // namespace zl
