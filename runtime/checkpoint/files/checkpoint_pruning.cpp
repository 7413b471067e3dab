// Listing and pruning the checkpoints of a directory (see checkpoint_pruning.h).
#include "runtime/checkpoint/files/checkpoint_pruning.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/files/run_identity.h"
#include "runtime/checkpoint/files/shard_manifest.h"

namespace zl {
namespace fs = std::filesystem;

namespace {

// A file of the start-up check (kSharedDirCheckPrefix): rank 0's, named by 16 hex digits of the
// launch's token, or another rank's, with ".r<rank>" after them. Nothing else is removed.
bool is_shared_dir_check_file(const std::string& name) {
  static const std::regex kAfterPrefix(R"([0-9a-f]{16}(\.r[0-9]+)?)");
  return name.starts_with(kSharedDirCheckPrefix) &&
         std::regex_match(name.substr(std::strlen(kSharedDirCheckPrefix)), kAfterPrefix);
}

}  // namespace

std::vector<DirCheckpoint> list_checkpoints(const std::string& dir) {
  std::vector<DirCheckpoint> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::int64_t step = checkpoint_step_of(name);
    // A sharded checkpoint is its directory, whole once its manifest exists (shard_manifest.h).
    if (step < 0 && sharded_step_of(name) >= 0 && fs::exists(entry.path() / kManifestName, ec)) {
      step = sharded_step_of(name);
    }
    if (step >= 0) {
      found.push_back({step, name, checkpoint_metadata_value(entry.path().string(), "run_id")});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.step < b.step; });
  return found;
}

std::vector<std::string> checkpoints_to_prune(const std::vector<DirCheckpoint>& found,
                                              std::int64_t keep, const std::string& latest_name,
                                              std::int64_t protected_step,
                                              const std::string& run_id) {
  std::vector<const DirCheckpoint*> own;
  for (const DirCheckpoint& c : found) {
    if (c.run_id && *c.run_id == run_id) own.push_back(&c);
  }
  std::sort(own.begin(), own.end(), [](const auto* a, const auto* b) { return a->step > b->step; });
  std::vector<std::string> gone;
  const auto kept = static_cast<std::size_t>(std::max<std::int64_t>(keep, 0));
  for (std::size_t i = kept; i < own.size(); ++i) {
    if (own[i]->name == latest_name || own[i]->step == protected_step) continue;
    gone.push_back(own[i]->name);
  }
  return gone;
}

void remove_checkpoint(const std::string& dir, const std::string& name) {
  std::error_code ec;
  // remove_all: a sharded checkpoint's directory goes with its manifest and shards.
  if (fs::remove_all(fs::path(dir) / name, ec) == static_cast<std::uintmax_t>(-1) || ec) {
    throw RuntimeFailure(fmt::format("cannot remove checkpoint '{}': {}",
                                     (fs::path(dir) / name).string(), ec.message()));
  }
}

void prune_checkpoints(const std::string& dir, std::int64_t keep, std::int64_t protected_step,
                       const std::string& run_id) {
  std::string latest_name;
  if (const auto latest = latest_checkpoint(dir)) {
    latest_name = fs::path(*latest).filename();
    // A sharded checkpoint's pointer names its manifest: the checkpoint is the directory.
    if (latest_name == kManifestName) latest_name = fs::path(*latest).parent_path().filename();
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::size_t suffix = std::strlen(kCheckpointTempSuffix);
    const bool temp = name.ends_with(kCheckpointTempSuffix) &&
                      checkpoint_step_of(name.substr(0, name.size() - suffix)) >= 0;
    if (temp) {
      fs::remove(entry.path(), ec);  // left by a crashed write; never renamed, never loadable
    } else if (is_shared_dir_check_file(name)) {
      // Left by a run killed during its start-up check: this run's check ended before training,
      // and the directory's lock refuses other runs (directory_lock.h; on a filesystem without
      // flock a second run into the directory is only warned, and is not supported).
      fs::remove(entry.path(), ec);
    } else if (sharded_step_of(name) >= 0 && entry.is_directory(ec) &&
               !fs::exists(entry.path() / kManifestName, ec)) {
      // A sharded write that crashed before its manifest (no write is in flight while pruning:
      // runtime/checkpoint/checkpoint_saver.h).
      fs::remove_all(entry.path(), ec);
    }
  }
  for (const std::string& name :
       checkpoints_to_prune(list_checkpoints(dir), keep, latest_name, protected_step, run_id)) {
    remove_checkpoint(dir, name);
  }
}

}  // namespace zl
