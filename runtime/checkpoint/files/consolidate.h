// Consolidating a sharded checkpoint into one safetensors file (`zerolap consolidate`): the
// parameters under their names, the format safetensors.torch.load_file reads, and optionally the
// optimizer state as optimizer.<param>.<state>, with the checkpoint's metadata. Rank-local, no
// MPI; memory is bounded by one chunk (the pieces are read and written a chunk at a time).
#pragma once

#include <string>

namespace zl {

enum class ConsolidateState { Include, Omit };
// Whether an existing regular file `out` may be replaced (`--overwrite`); a file of a checkpoint
// (its directory's files, a manifest, a `latest` pointer) never is.
enum class ExistingOutput { Refuse, Replace };

// `checkpoint`: a sharded checkpoint's manifest or directory. Checks the output first, then the
// manifest's facts and every shard as the loaders do (UserError naming a missing, truncated or
// foreign shard), then writes `out` atomically (temp file, fsync, rename). Returns the number of
// tensors written.
std::size_t consolidate_checkpoint(const std::string& checkpoint, const std::string& out,
                                   ConsolidateState state,
                                   ExistingOutput existing = ExistingOutput::Refuse);

// The temporary file consolidate_checkpoint writes before renaming it to `out`: a command stopped
// by a signal removes it (runtime/cli/interrupt.h, RemoveOnInterrupt).
std::string consolidate_temp_path(const std::string& out);

}  // namespace zl
