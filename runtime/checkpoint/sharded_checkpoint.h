// Sharded checkpoints (checkpoint.format = "sharded", docs/checkpoints.md): every rank writes the
// state it holds as its own safetensors file, in parallel, and no rank gathers another's; rank 0
// then writes the manifest (shard_manifest.h) with the atomic protocol and points `latest` at it.
// A save is a few steps so that file I/O can run in the background (background_task.h):
// describe_shard (collective: the directory, the generation, this rank's tensors), then either
// copy_shard (async: this rank's pieces into host memory, on a quiescent state) and write_shard in
// the background, or write_shard_in_place (sync: straight from the state, no copy of it), then
// gather_shard_records (collective, small: every shard's size and CRC to rank 0) and
// publish_checkpoint (rank 0's file I/O: manifest, `latest`), then prune_after_publish.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint_comm.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/checkpoint/files/shard_manifest.h"
#include "runtime/train/run/training_state.h"

namespace zl {

// Where one tensor of a shard reads its values: a piece of a parameter (its values, or its
// masters where the state keeps them) or one of the piece's optimizer state tensors.
struct TensorSource {
  int param = 0, bucket = 0;
  std::int64_t begin = 0;  // the piece's first element, within the parameter
  std::int64_t flat = 0;   // ... in the flat parameters
  int state = -1;          // index into the optimizer's state_names; -1: the values
};

// One rank's shard: the file's tensors, where each reads its values, and (async, after
// copy_shard) their data in host memory, in file order.
struct StagedShard {
  std::string path;
  std::vector<TensorSpec> tensors;
  std::vector<TensorSource> sources;  // one per tensor
  std::map<std::string, std::string> metadata;
  // Async: the staging buffer, kept from one checkpoint to the next (its size changes only with
  // the shard's); copy_shard fills it.
  std::vector<float> data;
  std::int64_t step = 0;
  int rank = 0;
};

// A shard once durable (file fsynced, its directory entry too).
struct WrittenShard {
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;
};

// What the commit of a staged checkpoint needs, fixed at staging time (the run moves on).
struct ShardCommit {
  std::string dir;       // checkpoint.dir
  std::string step_dir;  // dir/step_<step>
  Manifest manifest;     // every shard's pieces; gather_shard_records adds sizes and CRCs
  std::int64_t keep = 3;
  std::int64_t protected_step = -1;  // pruning keeps it (the checkpoint the run resumed from)
  std::string run_id;  // rank 0: the run whose checkpoints pruning may delete (run_identity.h)
  bool quiet = false;
  double staged_s = 0;  // the staging copy's seconds (async), the in-place write's (sync)
  // Seconds training stopped for this checkpoint before its publication (the saver sets it), and
  // whether it also stops for the publication (sync) or that runs in the background (async).
  double stopped_s = 0;
  bool synchronous = true;
};

// Collective over state.world (`comm`: a private communicator). Rank 0 creates the checkpoint's
// directory and picks a generation above the one its manifest names (a checkpoint of the same
// step written again never touches the files the old manifest names); every rank lists in `out`
// the tensors of the pieces it holds and where they are (reusing its memory). `checkpoint` says
// where (its dir) and how many to keep.
ShardCommit describe_shard(const TrainingState& state, const CheckpointConfig& checkpoint,
                           const CheckpointComm& comm, StagedShard& out);

// The floats of `rank`'s shard (its pieces' values and optimizer state): the size of its async
// staging buffer. 0 in a link.ranks timing study, which holds no checkpointable state.
std::int64_t staged_floats(const TrainingState& state, int rank);

// Rank-local: copies the described shard's values into shard.data, so that training may change
// the state while write_shard writes them. Throws RuntimeFailure for a non-finite value.
void copy_shard(const TrainingState& state, StagedShard& shard);

// Rank-local: writes and fsyncs the copied shard and its directory entry. RuntimeFailure naming
// the rank and the file (disk full, I/O error).
WrittenShard write_shard(const StagedShard& shard);

// Rank-local: the same for a described shard, read straight from `state` (in place on the CPU; a
// bounded buffer at a time from a GPU or for masters), which must not change until it returns.
// Checks every value first: a non-finite one is a RuntimeFailure, and no file is written.
WrittenShard write_shard_in_place(const TrainingState& state, const StagedShard& shard);

// Collective, once every rank's shard is durable: every rank's WrittenShard goes to rank 0, which
// gets the manifest with every shard's size and CRC (the other ranks: nothing).
std::optional<Manifest> gather_shard_records(const CheckpointComm& comm, int rank, int world,
                                             const ShardCommit& commit, const WrittenShard& mine);

// Rank 0, file I/O only (it may run in the background): writes the complete manifest, points
// `latest` at it and prints the checkpoint's line. RuntimeFailure naming the file it could not
// write.
void publish_checkpoint(const ShardCommit& commit, const Manifest& complete);

// Rank 0, file I/O only, after publish_checkpoint and before the next checkpoint starts: removes
// the files of the step's directory the manifest does not name (an older generation, what a
// crashed write left) and prunes to `keep`. A sync save() leaves this to the background too:
// deleting the pruned checkpoint (1 GB: 0.17 s here) is no part of committing this one.
void prune_after_publish(const ShardCommit& commit, const Manifest& complete);

// Collective: restores the state from the sharded checkpoint whose manifest is `manifest_path`
// (read on rank 0), into any mode, stage, world size and precision. Each rank checks the CRC32 of
// every world-th shard and reads only the byte ranges it needs, a bucket at a time. A missing,
// truncated or foreign shard is a UserError naming the file, reported once (ReportedUserError).
void load_sharded_checkpoint(const TrainingState& state, const std::string& manifest_path);

}  // namespace zl
