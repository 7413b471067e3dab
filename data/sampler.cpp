// DistributedSampler and eval_shard; see Note [Global batch] in sampler.h. The epoch permutation
// is a Fisher-Yates shuffle driven by DataRng(seed, epoch), so every rank computes the same one
// with no communication, and it is independent of the world size.
#include "data/sampler.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "base/errors.h"
#include "data/data_rng.h"

namespace zl {

DistributedSampler::DistributedSampler(const SamplerSpec& spec) : spec_(spec) {
  ZL_CHECK(spec.world_size >= 1, "world size {}", spec.world_size);
  if (spec.local_batch < 1) {
    throw UserError(
        fmt::format("data.batch_size must be >= 1 (samples per rank), got {}", spec.local_batch));
  }
  // Overflow-safe form of local_batch * world_size > num_samples.
  if (spec.num_samples < 1 || spec.local_batch > spec.num_samples / spec.world_size) {
    throw UserError(fmt::format(
        "data.batch_size ({}) x world size ({}) = {} exceeds the {} samples of {}: not one full "
        "global batch fits; lower data.batch_size or run on fewer ranks",
        spec.local_batch, spec.world_size,
        spec.local_batch > std::numeric_limits<std::int64_t>::max() / spec.world_size
            ? std::string("more than 2^63")
            : fmt::format("{}", spec.local_batch * spec.world_size),
        spec.num_samples, spec.dataset_name));
  }
  if (!spec_.shuffle) {
    // Identity for every epoch: built once, never rebuilt.
    perm_.resize(static_cast<std::size_t>(spec_.num_samples));
    std::iota(perm_.begin(), perm_.end(), std::int64_t{0});
  }
}

std::int64_t DistributedSampler::global_batch() const {
  return spec_.local_batch * spec_.world_size;
}

std::int64_t DistributedSampler::batches_per_epoch() const {
  return spec_.num_samples / global_batch();
}

void DistributedSampler::batch_indices(std::int64_t epoch, std::int64_t batch_in_epoch, int rank,
                                       std::vector<std::int64_t>& out) {
  ZL_CHECK(epoch >= 0, "epoch {}", epoch);
  ZL_CHECK(batch_in_epoch >= 0 && batch_in_epoch < batches_per_epoch(), "batch {} of {} per epoch",
           batch_in_epoch, batches_per_epoch());
  ZL_CHECK(rank >= 0 && rank < spec_.world_size, "rank {} of {}", rank, spec_.world_size);
  if (spec_.shuffle && epoch != cached_epoch_) {
    // Training walks epochs in order, so one cached permutation serves a whole epoch.
    perm_.resize(static_cast<std::size_t>(spec_.num_samples));
    std::iota(perm_.begin(), perm_.end(), std::int64_t{0});
    DataRng rng(spec_.seed, static_cast<std::uint64_t>(epoch));
    for (std::size_t i = perm_.size() - 1; i > 0; --i) {
      const std::size_t j = static_cast<std::size_t>(rng.below(i + 1));
      std::swap(perm_[i], perm_[j]);
    }
    cached_epoch_ = epoch;
  }
  const std::int64_t begin = batch_in_epoch * global_batch() + rank * spec_.local_batch;
  out.assign(perm_.begin() + begin, perm_.begin() + begin + spec_.local_batch);
}

Shard eval_shard(std::int64_t n, int rank, int world_size) {
  ZL_CHECK(n >= 0 && world_size >= 1 && rank >= 0 && rank < world_size, "n {} rank {} of {}", n,
           rank, world_size);
  // The first n % world_size ranks take one extra sample.
  const std::int64_t base = n / world_size;
  const std::int64_t extra = n % world_size;
  Shard shard;
  shard.begin = rank * base + std::min<std::int64_t>(rank, extra);
  shard.end = shard.begin + base + (rank < extra ? 1 : 0);
  return shard;
}

}  // namespace zl
