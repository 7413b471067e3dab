// The shard files of one sharded checkpoint's manifest, for reading pieces of parameters and their
// state (Note [Shard pieces] in sharded_write.cpp). Rank-local, no MPI. Each shard is opened when
// first needed and checked to be the one its manifest names (size, header, step, rank, generation,
// piece tensors); a missing, truncated or foreign shard is a UserError naming the file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/checkpoint/files/shard_manifest.h"

namespace zl {

class ShardSet {
 public:
  // `m` must outlive the set.
  ShardSet(const Manifest& m, std::string manifest_path);

  // Shard i: its size against the manifest, its header, and that it is this manifest's.
  const SafetensorsReader& open(std::size_t i);
  // Everything a reader checks of shard i before using it: its CRC32 (verify_shard), then what
  // open(i) checks. The loaders, `consolidate` and `inspect` all check a shard with this function.
  void verify(std::size_t i) const;
  // Elements [lo, hi) of parameter `param`'s value (which = -1) or of its state `which` (index
  // into the manifest's state names) into out[0, hi - lo).
  void read(const std::string& param, int which, std::int64_t lo, std::int64_t hi, float* out);

 private:
  // Shard i opened and checked against the manifest (open's checks).
  std::unique_ptr<SafetensorsReader> checked_reader(std::size_t i) const;

  const Manifest& m_;
  std::string path_;
  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
  std::map<std::string, std::vector<std::pair<std::size_t, const ShardPiece*>>> by_param_;
};

}  // namespace zl
