// CheckpointSaver: the checkpoints of one training run in the configured format (checkpoint.format,
// checkpoint.async; docs/checkpoints.md). The training loop calls save() at a checkpoint step on a
// quiescent state, poll() after every step and finish() before it exits; all three are collective.
// A sync sharded save() writes every rank's shard straight from the state and commits it; rank 0
// prunes in the background. With async sharded checkpoints save() only stages this rank's shard
// into host memory; a background task writes it while training goes on; the first poll() at which
// every rank's shard is durable gathers their sizes and CRCs to rank 0, whose background task then
// publishes the checkpoint (manifest, then `latest`, then pruning). At most one checkpoint is in
// flight: a save() waits for the one before to be published. The background task starts at idle
// priority and is hurried once it has taken a quarter of the time between the last two checkpoints
// (Note [Checkpoint writes use idle CPU] in background_task.h).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "runtime/checkpoint/background_task.h"
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

  // Async sharded checkpoints: allocates (and touches) the staging buffer now, before training,
  // rather than in the first checkpoint's stop (there 0.3-0.6 s instead of 0.06-0.09 s, 250 MB a
  // rank on 4 ranks of configs/bench_large.toml), and so that a host without the memory fails at
  // the start. Optional; save() allocates what is missing.
  void reserve_staging(const TrainingState& state);
  void save(const TrainingState& state);
  // A failed background write on this rank (or a failed publication on rank 0) ends the job here:
  // RuntimeFailure naming the rank and the file (exit 1). Costs one small all-reduce per step
  // while a shard write is in flight, none else.
  void poll();
  // Waits for the checkpoint in flight and publishes it: the final and the interrupt's
  // checkpoint, and after a divergence the last finite one, are complete before the run exits.
  void finish();
  // The path a checkpoint of `step` has in checkpoint.dir (the single file or the directory).
  std::string path_of(std::int64_t step) const;

 private:
  // Collective: once every rank's shard is durable, gathers their records and starts rank 0's
  // publication in the background.
  void commit_in_flight();

  const Config& config_;
  const World& world_;
  std::optional<CheckpointComm> comm_;  // the sharded format's; none for single files
  // The shard write in flight, then (rank 0) the publication. Declared after the buffers its
  // tasks use, so that it is destroyed, and its thread joined, before them.
  StagedShard staged_;                   // reused from one checkpoint to the next
  ShardCommit pending_;                  // the checkpoint in flight
  WrittenShard written_by_task_;         // what the shard write returned (read after wait())
  std::optional<WrittenShard> written_;  // this rank's shard, once durable
  bool in_flight_ = false;               // staged, not yet gathered (the same on every rank)
  // When the last save() started (at first: the saver's construction), the time between the last
  // two, and when this checkpoint's write started (its publication counts from there too).
  std::chrono::steady_clock::time_point last_save_ = std::chrono::steady_clock::now();
  double interval_s_ = 0;
  std::chrono::steady_clock::time_point task_started_;
  BackgroundTask task_;
};

}  // namespace zl
