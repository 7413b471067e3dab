// Tests for data/sampler.h: Note [Global batch] (rank shards partition the global batch, and
// N ranks x B see the samples of 1 rank x N*B in the same order), epochs, errors, eval_shard.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "base/errors.h"
#include "data/sampler.h"

namespace {

zl::SamplerSpec spec_of(std::int64_t n, std::int64_t batch, int world, bool shuffle = true,
                        std::uint64_t seed = 3) {
  zl::SamplerSpec spec;
  spec.num_samples = n;
  spec.local_batch = batch;
  spec.world_size = world;
  spec.shuffle = shuffle;
  spec.seed = seed;
  spec.dataset_name = "test/train";
  return spec;
}

// Rank shards of one global batch, concatenated in rank order.
std::vector<std::int64_t> global_batch(zl::DistributedSampler& sampler, int world,
                                       std::int64_t epoch, std::int64_t step) {
  std::vector<std::int64_t> all, part;
  for (int r = 0; r < world; ++r) {
    sampler.batch_indices(epoch, step, r, part);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

std::vector<std::int64_t> epoch_order(zl::DistributedSampler& sampler, int world,
                                      std::int64_t epoch) {
  std::vector<std::int64_t> all;
  for (std::int64_t k = 0; k < sampler.batches_per_epoch(); ++k) {
    const std::vector<std::int64_t> g = global_batch(sampler, world, epoch, k);
    all.insert(all.end(), g.begin(), g.end());
  }
  return all;
}

}  // namespace

TEST_CASE("sampler: rank shards are disjoint and make up the global batch", "[data]") {
  const std::int64_t n = 1003, batch = 8;
  const int world = 4;
  zl::DistributedSampler sampler(spec_of(n, batch, world));
  CHECK(sampler.global_batch() == 32);
  CHECK(sampler.batches_per_epoch() == 31);  // 1003 / 32, the last partial batch dropped
  std::set<std::int64_t> seen;
  std::vector<std::int64_t> part;
  for (std::int64_t k = 0; k < sampler.batches_per_epoch(); ++k) {
    for (int r = 0; r < world; ++r) {
      sampler.batch_indices(0, k, r, part);
      REQUIRE(part.size() == static_cast<std::size_t>(batch));
      for (std::int64_t i : part) {
        CHECK(i >= 0);
        CHECK(i < n);
        CHECK(seen.insert(i).second);  // no sample twice in an epoch, across ranks and steps
      }
    }
  }
  CHECK(seen.size() == 31u * 32u);
}

TEST_CASE("sampler: N ranks x B equals 1 rank x N*B, in order", "[data]") {
  for (int world : {2, 3, 4, 8}) {
    const std::int64_t batch = 5;
    zl::DistributedSampler many(spec_of(997, batch, world));
    zl::DistributedSampler one(spec_of(997, batch * world, 1));
    REQUIRE(many.batches_per_epoch() == one.batches_per_epoch());
    std::vector<std::int64_t> single;
    for (std::int64_t epoch : {0, 1, 7}) {
      for (std::int64_t k = 0; k < many.batches_per_epoch(); ++k) {
        one.batch_indices(epoch, k, 0, single);
        CHECK(global_batch(many, world, epoch, k) == single);
      }
    }
  }
}

TEST_CASE("sampler: epochs are permutations that differ; the cache follows the epoch", "[data]") {
  zl::DistributedSampler sampler(spec_of(500, 10, 5));  // 50 per step: the epoch covers all
  const std::vector<std::int64_t> e0 = epoch_order(sampler, 5, 0);
  const std::vector<std::int64_t> e1 = epoch_order(sampler, 5, 1);
  std::vector<std::int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> identity(500);
  std::iota(identity.begin(), identity.end(), std::int64_t{0});
  CHECK(sorted == identity);
  CHECK(e0 != identity);
  CHECK(e0 != e1);
  // Back to epoch 0 after epoch 1 (a resume, or an evaluation) gives epoch 0's order again.
  CHECK(epoch_order(sampler, 5, 0) == e0);
  // A fresh sampler with the same seed agrees; another seed does not.
  zl::DistributedSampler same(spec_of(500, 10, 5));
  CHECK(epoch_order(same, 5, 1) == e1);
  zl::DistributedSampler other(spec_of(500, 10, 5, true, 4));
  CHECK(epoch_order(other, 5, 0) != e0);
}

TEST_CASE("sampler: shuffle = false walks the samples in order every epoch", "[data]") {
  zl::DistributedSampler sampler(spec_of(103, 4, 3, false));
  std::vector<std::int64_t> expected(96);
  std::iota(expected.begin(), expected.end(), std::int64_t{0});
  CHECK(epoch_order(sampler, 3, 0) == expected);
  CHECK(epoch_order(sampler, 3, 5) == expected);
  std::vector<std::int64_t> part;
  sampler.batch_indices(2, 1, 2, part);  // step 1 = [12, 24), rank 2 = [20, 24)
  CHECK(part == std::vector<std::int64_t>{20, 21, 22, 23});
}

TEST_CASE("sampler: a global batch larger than the dataset is a UserError", "[data]") {
  try {
    zl::DistributedSampler sampler(spec_of(100, 30, 4));
    FAIL("expected a UserError");
  } catch (const zl::UserError& e) {
    CHECK_THAT(std::string(e.what()),
               Catch::Contains("data.batch_size (30) x world size (4) = 120 exceeds the 100 "
                               "samples of test/train"));
  }
  CHECK_THROWS_AS(zl::DistributedSampler(spec_of(100, 0, 1)), zl::UserError);
  CHECK_THROWS_AS(zl::DistributedSampler(spec_of(0, 1, 1)), zl::UserError);
  CHECK_THROWS_AS(zl::DistributedSampler(spec_of(100, INT64_MAX / 2, 4)), zl::UserError);
  // Exactly one global batch fits.
  zl::DistributedSampler fits(spec_of(100, 25, 4));
  CHECK(fits.batches_per_epoch() == 1);
}

TEST_CASE("eval_shard covers [0, n) exactly, in rank order, sizes within 1", "[data]") {
  for (std::int64_t n : {0, 1, 3, 10, 10000, 10001}) {
    for (int world : {1, 2, 3, 4, 7}) {
      std::int64_t next = 0, smallest = n, largest = 0;
      for (int r = 0; r < world; ++r) {
        const zl::Shard s = zl::eval_shard(n, r, world);
        CHECK(s.begin == next);
        CHECK(s.end >= s.begin);
        smallest = std::min(smallest, s.end - s.begin);
        largest = std::max(largest, s.end - s.begin);
        next = s.end;
      }
      CHECK(next == n);
      CHECK(largest - smallest <= 1);
    }
  }
}
