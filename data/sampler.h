// The distributed sampler: maps (seed, epoch, step, rank, world size) to the sample indices of one
// rank's share of one global batch, deterministically and without communication.
//
// Note [Global batch]: an epoch is a permutation of [0, num_samples) (identity when shuffle is
// off) drawn from (seed, epoch) alone — not from the world size. Global batch k is
// perm[k*G, (k+1)*G) with G = local_batch * world_size, and rank r takes the slice
// [r*local_batch, (r+1)*local_batch) of it. So N ranks x batch B see exactly the samples of
// 1 rank x batch N*B, which the equivalence tests rely on. The incomplete last batch is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zl {

struct SamplerSpec {
  std::int64_t num_samples = 0;
  std::int64_t local_batch = 1;
  int world_size = 1;
  bool shuffle = true;
  std::uint64_t seed = 0;
  std::string dataset_name = "the dataset";  // for error messages only
};

class DistributedSampler {
 public:
  explicit DistributedSampler(const SamplerSpec& spec);  // throws UserError if no full batch fits

  std::int64_t batches_per_epoch() const;  // global batches: floor(num_samples / global batch)
  std::int64_t global_batch() const;

  // Indices of rank `rank`'s share of global batch `batch_in_epoch` of `epoch` (local_batch of
  // them).
  void batch_indices(std::int64_t epoch, std::int64_t batch_in_epoch, int rank,
                     std::vector<std::int64_t>& out);

 private:
  SamplerSpec spec_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> perm_;
};

// Contiguous shard of [0, n) for evaluation: rank r gets [begin, end), sizes differ by at most 1.
struct Shard {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};
Shard eval_shard(std::int64_t n, int rank, int world_size);

}  // namespace zl
