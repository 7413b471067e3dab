// The split of data.global_batch_size over a world size (see global_batch.h).
#include "runtime/config/global_batch.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/config/config_limits.h"

namespace zl {
namespace {

constexpr std::size_t kSizesShown = 12;  // world sizes named in a message

// The world sizes up to kMaxWorldSize for which `global` splits exactly, as text.
std::string working_world_sizes(std::int64_t global) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t w = 1; w <= global && w <= kMaxWorldSize; ++w) {
    if (global % w == 0) sizes.push_back(w);
  }
  const auto shown = static_cast<std::ptrdiff_t>(std::min(sizes.size(), kSizesShown));
  std::string text = fmt::format("{}", fmt::join(sizes.begin(), sizes.begin() + shown, ", "));
  if (sizes.size() > kSizesShown) text += fmt::format(" ... {}", sizes.back());
  return text;
}

}  // namespace

BatchSplit split_global_batch(std::int64_t global, std::int64_t max_per_rank,
                              std::int64_t world_size, const std::string& source) {
  if (world_size < 1 || global % world_size != 0) {
    throw UserError(fmt::format(
        "{}: data.global_batch_size = {} has no exact split over {} ranks (per-rank batch x ranks "
        "x train.grad_accum must equal it, so the world size must divide it); world sizes that "
        "work: {}",
        source, global, world_size, working_world_sizes(global)));
  }
  const std::int64_t per_world = global / world_size;  // samples per rank per step
  for (std::int64_t b = std::min(max_per_rank, per_world); b >= 1; --b) {
    if (per_world % b != 0) continue;
    const std::int64_t accum = per_world / b;
    if (accum > kMaxGradAccum) break;  // smaller b only takes more micro-batches
    return {b, accum};
  }
  throw UserError(fmt::format(
      "{}: data.global_batch_size = {} on {} ranks with micro-batches of at most data.batch_size = "
      "{} takes more than {} micro-batches per step (train.grad_accum's limit); raise "
      "data.batch_size",
      source, global, world_size, max_per_rank, kMaxGradAccum));
}

void apply_global_batch(Config& config, std::int64_t world_size) {
  DataConfig& d = config.data;
  if (d.global_batch_size == 0) return;
  if (d.configured_batch_size == 0) {
    d.configured_batch_size = d.batch_size;
    d.configured_grad_accum = config.train.grad_accum;
  }
  ZL_CHECK(d.configured_grad_accum == 1, "train.grad_accum = {} with a global batch (the config "
           "reader refuses it)", d.configured_grad_accum);
  const BatchSplit split =
      split_global_batch(d.global_batch_size, d.configured_batch_size, world_size,
                         where_set(config, "data.global_batch_size"));
  d.batch_size = split.per_rank;
  config.train.grad_accum = split.grad_accum;
}

std::string describe_batch_split(const Config& config, std::int64_t world_size) {
  const std::int64_t b = config.data.batch_size, a = config.train.grad_accum;
  return fmt::format("{} samples per step = {} per rank x {} rank{} x {} micro-batch{}{}",
                     b * world_size * a, b, world_size, world_size == 1 ? "" : "s", a,
                     a == 1 ? "" : "es",
                     config.data.global_batch_size > 0 ? " (data.global_batch_size)" : "");
}

}  // namespace zl
