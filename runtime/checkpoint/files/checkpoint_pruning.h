// Which checkpoints a directory holds, of which run, and which of them `checkpoint.keep` deletes
// (docs/checkpoints.md, "Crash safety" and "One owner per directory"). One function decides what
// to delete (checkpoints_to_prune, from step numbers, names and run ids alone, whatever a
// checkpoint's layout); one function deletes a checkpoint as a whole (remove_checkpoint).
// Rank-local; rank 0 calls these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zl {

// A checkpoint in a directory: its step, its name in the directory and the run that wrote it
// (nullopt: unreadable; "": written before run ids).
struct DirCheckpoint {
  std::int64_t step = 0;
  std::string name;
  std::optional<std::string> run_id;
};

// The checkpoints in `dir` in step order (none when it does not exist), each file's run id read
// from its metadata.
std::vector<DirCheckpoint> list_checkpoints(const std::string& dir);

// The names pruning deletes from `found`: of the checkpoints run `run_id` wrote, all but the `keep`
// newest, never the one named `latest_name` nor the one of step `protected_step` (>= 0: the
// checkpoint a running run resumed from). Another run's checkpoints, and unreadable ones, are
// never pruned.
std::vector<std::string> checkpoints_to_prune(const std::vector<DirCheckpoint>& found,
                                              std::int64_t keep, const std::string& latest_name,
                                              std::int64_t protected_step,
                                              const std::string& run_id);

// Deletes checkpoint `name` of `dir` as a whole. RuntimeFailure naming it when that fails.
void remove_checkpoint(const std::string& dir, const std::string& name);

// Deletes what checkpoints_to_prune says for run `run_id`, and temp files left by crashed writes
// and killed start-up checks.
void prune_checkpoints(const std::string& dir, std::int64_t keep, std::int64_t protected_step,
                       const std::string& run_id);

}  // namespace zl
