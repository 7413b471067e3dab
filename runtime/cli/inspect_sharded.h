// `zerolap inspect` of a sharded checkpoint: the manifest's facts, then every shard with its
// rank, size, CRC32 and whether the file matches them. Rank-local (rank 0 of inspect).
#pragma once

#include <string>

namespace zl {

// Prints the listing of the manifest at `manifest_path`; a shard that is missing, truncated or
// differs is listed as such, and then reported as a UserError (exit 2) naming the first one.
void inspect_sharded_checkpoint(const std::string& manifest_path);

}  // namespace zl
