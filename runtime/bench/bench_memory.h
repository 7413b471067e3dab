// The bench's memory check, before it allocates anything: the CPU copy of the model the bench
// keeps for its figures, the buffers its optimizer measurement times, and the largest run of its
// modes x bucket caps x precisions, against the node's available memory and
// runtime.memory_limit_mb.
#pragma once

#include "runtime/comm/world.h"
#include "runtime/config/config.h"

namespace zl {

// Throws UserError (exit 2) naming the estimate and the key to change when the bench would not
// fit this node's memory (MemAvailable shared by the node's ranks) or runtime.memory_limit_mb.
// Rank-local.
void check_bench_memory(const Config& config, const World& world);

}  // namespace zl
