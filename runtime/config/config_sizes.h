// The config check of the sizes derived from several keys at once (internal to runtime/config*):
// activations of a batch, generated data sets. Each is computed with overflow checks and bounded
// by kMaxDerivedBytes (config_limits.h); a figure past it fails naming the key to lower.
#pragma once

#include "runtime/config/config.h"
#include "runtime/config/config_reader.h"

namespace zl::config_detail {

void check_derived_sizes(const Config& config, const ConfigSource& source);

}  // namespace zl::config_detail
