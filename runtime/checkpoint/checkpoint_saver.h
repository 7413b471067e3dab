// CheckpointSaver: the checkpoints of one training run in the configured format
// (checkpoint.format, checkpoint.async; docs/checkpoints.md). The training loop calls save() at a
// checkpoint step on a quiescent state, poll() after every step and finish() before it exits;
// all three are collective. With async sharded checkpoints save() only stages this rank's shard
// into host memory; a background writer writes it while training goes on; the first poll() at
// which every rank's shard is durable commits it (manifest, then `latest`). At most one
// checkpoint is in flight: a save() waits for and commits the one before.
#pragma once

#include <mpi.h>

#include <memory>
#include <optional>
#include <string>

#include "runtime/checkpoint/async_shard_writer.h"
#include "runtime/checkpoint/sharded_checkpoint.h"
#include "runtime/config/config.h"
#include "runtime/comm/world.h"
#include "runtime/train/run/training_state.h"

namespace zl {

class CheckpointSaver {
 public:
  // Collective (creates the sharded format's private communicator).
  CheckpointSaver(const Config& config, const World& world);
  ~CheckpointSaver();
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  void save(const TrainingState& state);
  // A failed background write on this rank ends the job here: RuntimeFailure naming the rank and
  // the file (exit 1). Costs one small all-reduce per step while a write is in flight, none else.
  void poll();
  // Waits for the write in flight and commits it: the final and the interrupt's checkpoint are
  // complete before the run exits.
  void finish();
  // The path a checkpoint of `step` has in checkpoint.dir (the single file or the directory).
  std::string path_of(std::int64_t step) const;

 private:
  void commit_in_flight();

  const Config& config_;
  const World& world_;
  WaitLimit limit_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::unique_ptr<AsyncShardWriter> writer_;
  ShardCommit pending_;                  // the checkpoint in flight
  bool in_flight_ = false;               // staged, not yet committed
  std::optional<WrittenShard> written_;  // this rank's shard of it, once durable
};

}  // namespace zl
