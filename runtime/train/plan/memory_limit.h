// runtime.memory_limit_mb: the most one rank may use, so that a config can be checked against a
// device smaller than the machine it is tried on. The largest rank's estimate (memory_estimate.h)
// is compared against it before anything is allocated; a config above it is refused naming the
// settings that would fit (a higher ZeRO stage, bf16, smaller buckets, more ranks), each with
// its largest rank's estimate.
#pragma once

#include "runtime/config/config.h"

namespace zl {

// Throws UserError (exit 2) when runtime.memory_limit_mb > 0 and the largest rank of `config` on
// `world` ranks needs more. The same on every rank (the largest rank's figure, not this rank's).
void check_memory_limit(const Config& config, int world);

}  // namespace zl
