// The manifest of a sharded checkpoint (docs/checkpoints.md, "Sharded checkpoints"): a JSON file
// that names every shard file with its size, CRC32 and the parameter elements it holds, plus the
// run's facts. Rank-local, no MPI. Reading validates everything a damaged, truncated or foreign
// manifest can get wrong and throws UserError naming the file; shards are checked against it here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zl {

struct CheckpointFacts;  // runtime/checkpoint/files/checkpoint_files.h

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kShardedFormat = "zerolap-sharded-checkpoint";
inline constexpr const char* kShardFormat = "zerolap-checkpoint-shard";
inline constexpr const char* kShardedFormatVersion = "1";

// Elements [begin, begin + numel) of the flattened parameter `name`. A shard holds, per piece, the
// fp32 value under the parameter's name and each state as optimizer.<name>.<state>, all 1-D.
struct ShardPiece {
  std::string name;
  std::int64_t begin = 0, numel = 0;
};

struct ShardEntry {
  std::string file;  // relative to the manifest's directory
  int rank = 0;
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;  // of the whole file
  std::vector<ShardPiece> pieces;
};

struct ManifestParameter {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t numel() const;
};

struct Manifest {
  std::int64_t step = 0;
  std::int64_t generation = 0;  // one more than the manifest this one replaced in its directory
  int world_size = 0;
  std::vector<ManifestParameter> parameters;  // registration order
  std::vector<std::string> state_names;
  std::map<std::string, std::string> metadata;  // the single-file checkpoint's __metadata__
  std::vector<ShardEntry> shards;               // rank order
};

// "shard_00003_of_00004.g0.safetensors", in the checkpoint's directory (sharded_dir_name).
std::string shard_file_name(int rank, int world, std::int64_t generation);

// The manifest path when `path` is a sharded checkpoint: its manifest or its directory.
std::optional<std::string> sharded_manifest_of(const std::string& path);

std::string manifest_to_json(const Manifest& m);
// Parses and validates `text` (read from `path`, named in errors): checksum, format, every shard
// named once per rank, pieces of each parameter in bounds and covering it exactly once.
Manifest parse_manifest(const std::string& text, const std::string& path);
// The text of the manifest at `path`, read without blocking and bounded; read_manifest parses it.
std::string read_manifest_text(const std::string& path);
Manifest read_manifest(const std::string& path);
// Writes the manifest atomically into `dir` (temp file, fsync, rename, fsync the directory).
void write_manifest(const std::string& dir, const Manifest& m);

// The manifest's run facts from its metadata, checked as every reader of it checks them, with no
// model at hand: the metadata is a zerolap checkpoint's, its step and optimizer_step agree with
// the manifest's step, and each fact is within its meaning (check_checkpoint_facts). UserError
// "sharded checkpoint '<path>': ..." naming the key.
CheckpointFacts check_manifest_facts(const Manifest& m, const std::string& path);

// Size and CRC32 of shard `s` of the manifest at `manifest_path` against the manifest: UserError
// naming the file when it is missing, truncated or differs (another checkpoint's shard).
void verify_shard(const std::string& manifest_path, const ShardEntry& s);
// The file of shard `s` (beside the manifest at `manifest_path`). UserError naming it when it is
// missing, not a regular file (saying what it is: a directory, a FIFO), or not the size the
// manifest says (truncated, or another checkpoint's shard).
std::string complete_shard_path(const std::string& manifest_path, const ShardEntry& s);

}  // namespace zl
