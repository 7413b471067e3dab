// data.global_batch_size: a global batch that holds at any world size (docs/config.md, [data]).
// The rule: the per-rank batch is the largest b <= data.batch_size for which b x world divides
// the global batch G; train.grad_accum = G / (b x world). So b x world x grad_accum = G exactly,
// and an exact split exists exactly when the world size divides G. Every step takes the same G
// samples of the sampler's order at any world size (Note [Global batch] in data/sampler.h), so a
// run resumed on another world size continues on the same samples in the same order.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/config/config.h"

namespace zl {

struct BatchSplit {
  std::int64_t per_rank = 0;
  std::int64_t grad_accum = 0;
};

// The split of `global` samples over `world_size` ranks with micro-batches of at most
// `max_per_rank`. UserError (exit 2) naming data.global_batch_size, `source` and the world sizes
// that work when there is none, or when it would take more than kMaxGradAccum micro-batches.
BatchSplit split_global_batch(std::int64_t global, std::int64_t max_per_rank,
                              std::int64_t world_size, const std::string& source);

// When data.global_batch_size is set: data.batch_size and train.grad_accum become the split for
// `world_size` (the configured values stay in data.configured_batch_size and
// data.configured_grad_accum, which to_toml writes, so a saved config holds at any world size).
// Idempotent. Every entry point that builds a Trainer or a plan calls it with its world size.
void apply_global_batch(Config& config, std::int64_t world_size);

// "64 per step = 16 per rank x 4 ranks x 2 micro-batches": the split, for plan and progress lines.
std::string describe_batch_split(const Config& config, std::int64_t world_size);

}  // namespace zl
