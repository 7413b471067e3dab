// Consolidating a sharded checkpoint into one safetensors file (`zerolap consolidate`): the
// parameters under their names, the format safetensors.torch.load_file reads, and optionally the
// optimizer state as optimizer.<param>.<state>, with the checkpoint's metadata. Rank-local, no
// MPI; memory is bounded by one chunk (the pieces are read and written a chunk at a time).
#pragma once

#include <string>

namespace zl {

enum class ConsolidateState { Include, Omit };

// `checkpoint`: a sharded checkpoint's manifest or directory. Verifies every shard's CRC32 first
// (UserError naming a missing, truncated or foreign shard), then writes `out` atomically (temp
// file, fsync, rename). Returns the number of tensors written.
std::size_t consolidate_checkpoint(const std::string& checkpoint, const std::string& out,
                                   ConsolidateState state);

}  // namespace zl
