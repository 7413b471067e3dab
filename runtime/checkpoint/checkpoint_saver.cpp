// The checkpoints of a training run in the configured format (see checkpoint_saver.h).
#include "runtime/checkpoint/checkpoint_saver.h"

#include <chrono>
#include <filesystem>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/files/checkpoint_files.h"

namespace zl {

namespace {

using Clock = std::chrono::steady_clock;

bool sharded(const Config& c) { return c.checkpoint.format == CheckpointFormat::Sharded; }

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

CheckpointSaver::CheckpointSaver(const Config& config, const World& world)
    : config_(config), world_(world) {
  if (config.checkpoint.dir.empty() || !sharded(config)) return;
  comm_.emplace(world.comm, WaitLimit{world.rank, config.runtime.timeout_s});
}

CheckpointSaver::~CheckpointSaver() {
  // A failing run joins its task (its failure is already being reported) and leaves the
  // checkpoint in flight uncommitted.
  try {
    task_.wait();
  } catch (...) {
  }
}

std::string CheckpointSaver::path_of(std::int64_t step) const {
  const std::filesystem::path dir(config_.checkpoint.dir);
  return (dir / (sharded(config_) ? sharded_dir_name(step) : checkpoint_file_name(step))).string();
}

void CheckpointSaver::reserve_staging(const TrainingState& state) {
  if (!comm_ || !config_.checkpoint.async) return;
  staged_.data.resize(static_cast<std::size_t>(staged_floats(state, world_.rank)));
}

void CheckpointSaver::save(const TrainingState& state) {
  if (!sharded(config_)) {
    save_checkpoint(state);
    return;
  }
  const Clock::time_point start = Clock::now();
  interval_s_ = seconds_since(last_save_);
  last_save_ = start;
  // At most one checkpoint in flight: the previous one is written, gathered and published (its
  // pruning never meets a shard of this one: checkpoint_pruning.h) before this one is staged.
  // Training waits for the task from here: it needs no idle core to run.
  finish();
  const Clock::time_point staging = Clock::now();
  pending_ = describe_shard(state, config_.checkpoint, *comm_, staged_);
  pending_.synchronous = !config_.checkpoint.async;
  if (config_.checkpoint.async) {
    copy_shard(state, staged_);
    pending_.staged_s = seconds_since(staging);
    pending_.stopped_s = seconds_since(start);
    task_.start([this] { written_by_task_ = write_shard(staged_); });
    task_started_ = Clock::now();
    in_flight_ = true;
    return;
  }
  // Sync: no copy of the state, which holds still until the write returns.
  const WrittenShard written = write_shard_in_place(state, staged_);
  pending_.staged_s = seconds_since(staging);
  pending_.stopped_s = seconds_since(start);
  if (std::optional<Manifest> manifest =
          gather_shard_records(*comm_, world_.rank, world_.size, pending_, written)) {
    publish_checkpoint(pending_, *manifest);
    task_.start([commit = pending_, manifest = std::move(*manifest)] {
      prune_after_publish(commit, manifest);
    });
    task_started_ = Clock::now();
  }
  // As the single-file save: the checkpoint is committed before any rank moves on.
  timed_barrier(comm_->get(), comm_->limit(), "the barrier after writing a checkpoint");
}

void CheckpointSaver::commit_in_flight() {
  if (!written_) {
    task_.wait();  // rethrows this rank's failure
    written_ = written_by_task_;
  }
  std::optional<Manifest> manifest =
      gather_shard_records(*comm_, world_.rank, world_.size, pending_, *written_);
  written_.reset();
  in_flight_ = false;
  if (manifest) {
    task_.start([commit = pending_, manifest = std::move(*manifest)] {
      publish_checkpoint(commit, manifest);
      prune_after_publish(commit, manifest);
    });
  }
}

void CheckpointSaver::poll() {
  // Once the task has run for a quarter of the time between the last two save()s, so that the
  // write, then rank 0's publication, is done before the next.
  if (seconds_since(task_started_) > 0.25 * interval_s_) task_.hurry();
  if (!in_flight_) {
    // Rank 0's publication: its failure ends the job at the step boundary after it.
    if (task_.running() && task_.finished()) task_.wait();
    return;
  }
  // This rank's failure ends the job here, before it waits for any other rank.
  if (!written_ && task_.finished()) {
    task_.wait();
    written_ = written_by_task_;
  }
  int mine = written_ ? 1 : 0, all = 0;
  timed_allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm_->get(), comm_->limit(),
                  "asking whether every rank's checkpoint shard is durable");
  if (all == 1) commit_in_flight();
}

void CheckpointSaver::finish() {
  task_.hurry();
  if (in_flight_) commit_in_flight();
  task_.hurry();
  task_.wait();
}

}  // namespace zl
