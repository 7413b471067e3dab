// check_checkpoint_facts and check_checkpoint_values (see checkpoint_values.h).
#include "runtime/checkpoint/files/checkpoint_values.h"

#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/config/config_limits.h"

namespace zl {
namespace {

// The trainer's limit on micro-batches: beyond it a resumed run's step and sampler arithmetic
// would overflow.
constexpr std::int64_t kMaxCheckpointCount = std::int64_t{1} << 53;

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw UserError(fmt::format("checkpoint file '{}': {}", file, what));
}

}  // namespace

void check_checkpoint_facts(const std::string& file, const CheckpointFacts& facts) {
  for (const auto& [key, field] : kFactKeys) {
    if (facts.*field < 0 || facts.*field > kMaxCheckpointCount) {
      fail(file, fmt::format("metadata '{}' = {} is beyond any run (0 to {})", key, facts.*field,
                             kMaxCheckpointCount));
    }
  }
  // A run has at least one rank, one sample per step and one batch per epoch: a 0 here resumed
  // "at batch 0" and re-read the data from the start without a word.
  for (const auto& [key, value, meaning] :
       {std::tuple{"global_batch", facts.global_batch, "samples per micro-batch over all ranks"},
        {"batches_per_epoch", facts.batches_per_epoch, "micro-batches per epoch"},
        {"world_size", facts.world_size, "ranks of the run that wrote it"}}) {
    if (value < 1) {
      fail(file, fmt::format("metadata '{}' = {}: it counts the {}, at least 1 in any run; the "
                             "file was altered or written by another tool (resume from another "
                             "checkpoint)",
                             key, value, meaning));
    }
  }
  if (facts.world_size > kMaxWorldSize) {
    fail(file, fmt::format("metadata 'world_size' = {} is more ranks than any run has (at most {})",
                           facts.world_size, kMaxWorldSize));
  }
  if (facts.global_batch % facts.world_size != 0) {
    fail(file, fmt::format("metadata 'global_batch' = {} is not a multiple of 'world_size' = {} "
                           "(it is data.batch_size x the ranks)",
                           facts.global_batch, facts.world_size));
  }
  if (facts.optimizer_step > facts.step) {
    fail(file, fmt::format("metadata 'optimizer_step' = {} is larger than 'step' = {}: the "
                           "optimizer steps at most once per training step",
                           facts.optimizer_step, facts.step));
  }
  if (facts.global_batch > kMaxCheckpointCount / facts.batches_per_epoch) {
    fail(file, fmt::format("metadata 'batches_per_epoch' = {} of 'global_batch' = {} samples is "
                           "beyond any data set",
                           facts.batches_per_epoch, facts.global_batch));
  }
}

void check_checkpoint_values(const std::string& file, const std::string& tensor,
                             const float* values, std::int64_t n, std::int64_t first) {
  // The second moment is a running mean of squared gradients (docs/design.md, optimizer math).
  const bool second_moment = tensor.ends_with(".exp_avg_sq");
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = values[i];
    const bool finite = std::isfinite(v);
    if (finite && !(second_moment && v < 0.0f)) continue;
    const std::string why =
        finite ? "a second moment (exp_avg_sq) is a mean of squares, never negative"
               : "a run never writes a non-finite checkpoint (docs/design.md, \"Divergence\")";
    fail(file, fmt::format("tensor '{}' holds {} at element {}: {}; the file was altered or "
                           "written by another tool (resume from another checkpoint)",
                           escaped_excerpt(tensor), v, first + i, why));
  }
}

}  // namespace zl
