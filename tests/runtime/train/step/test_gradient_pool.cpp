// GradientPool (stage 2) on a loopback communicator: bucket b takes buffer b mod 2; backward
// writing a bucket waits until that buffer's last user was reduce-scattered and accumulated, and
// refuses a last user not yet issued; a reused buffer's padding is zeroed; the shard accumulates
// every micro-batch (the first overwrites).
#include <catch2/catch.hpp>

#include <chrono>
#include <future>

#include "base/errors.h"
#include "tests/runtime/train/step/loopback_step.h"

using namespace zl;
using namespace zl::test;

namespace {

GradientPool& pool_of(LoopbackStep& s) {
  REQUIRE(s.mode.pools_gradients());
  return s.parts.gradients.pool();
}

const std::vector<int>& ids_of_bucket(const LoopbackStep& s, int bucket) {
  return s.plan.buckets[static_cast<std::size_t>(bucket)].param_ids;
}

// The elements of bucket b no parameter covers (within the bucket).
std::vector<std::int64_t> padding_of(const LoopbackStep& s, int bucket) {
  const Bucket& b = s.plan.buckets[static_cast<std::size_t>(bucket)];
  std::vector<char> covered(static_cast<std::size_t>(b.numel), 0);
  for (int id : b.param_ids) {
    const ParameterInfo& p = s.store.info(id);
    for (std::int64_t i = 0; i < p.numel; ++i) {
      covered[static_cast<std::size_t>(p.offset - b.offset + i)] = 1;
    }
  }
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < covered.size(); ++i) {
    if (!covered[i]) out.push_back(static_cast<std::int64_t>(i));
  }
  return out;
}

}  // namespace

TEST_CASE("stage 2's pool: two buffers, bucket b in buffer b mod 2", "[gradient-pool]") {
  LoopbackStep s({.mode = mode_named("zero2/none/reduce_scatter_allgather")});
  GradientPool& pool = pool_of(s);
  REQUIRE(s.buckets() == 3);
  CHECK(pool.buffers() == 2);
  for (int b = 0; b < 3; ++b) CHECK(pool.buffer_of(b) == b % 2);
  CHECK(pool.pool_bytes() == 2 * s.plan.largest_bucket_numel() * 4);
}

TEST_CASE("backward waits for a pool buffer until its last bucket was reduce-scattered",
          "[gradient-pool]") {
  LoopbackStep s({.mode = mode_named("zero2/none/reduce_scatter_allgather")});
  Hold hold = s.reduce_comm.hold();
  s.forward();
  s.begin_backward(MicroBatch{});
  for (int b : {0, 1}) {
    for (int id : ids_of_bucket(s, b)) s.backward_param(id);
  }
  REQUIRE(s.issued("comm.reduce").size() == 2);  // issued, held on the stream
  // Bucket 2 takes bucket 0's buffer: its first gradient write waits for bucket 0's release.
  const int first_of_bucket_2 = ids_of_bucket(s, 2).front();
  auto write = std::async(std::launch::async,
                          [&] { pool_of(s).before_grad_write(first_of_bucket_2, s.compute()); });
  CHECK(write.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
  hold.open();
  write.get();
  const std::vector<LoggedCollective> log = s.log.entries();
  CHECK(log[0].done);  // bucket 0's reduce-scatter ran before its buffer was handed on
  for (int id : ids_of_bucket(s, 2)) s.backward_param(id);
  s.end_backward();
  CHECK(s.after_backward().finite);
}

TEST_CASE("writing a bucket whose buffer's last user was not reduce-scattered is an InternalError",
          "[gradient-pool]") {
  LoopbackStep s({.mode = mode_named("zero2/none/reduce_scatter_allgather")});
  GradientPool& pool = pool_of(s);
  s.begin_backward(MicroBatch{});
  pool.before_grad_write(ids_of_bucket(s, 0).front(), s.compute());  // bucket 0 holds buffer 0
  CHECK_THROWS_AS(pool.before_grad_write(ids_of_bucket(s, 2).front(), s.compute()),
                  InternalError);
}

TEST_CASE("a reused pool buffer's padding is zeroed before backward writes the bucket",
          "[gradient-pool]") {
  LoopbackStep s({.mode = mode_named("zero2/none/reduce_scatter_allgather")});
  const std::vector<std::int64_t> padding = padding_of(s, 0);
  REQUIRE(!padding.empty());  // layers.2's bias is padded to 16 elements
  // Step 1 leaves bucket 2's gradients (no padding) in buffer 0; step 2's bucket 0 reuses it.
  for (int step = 0; step < 2; ++step) {
    s.forward();
    s.backward(MicroBatch{});
    s.parts.reducer.wait_collectives(s.compute());
    const Bucket& b = s.plan.buckets[0];
    const BucketGradient g = pool_of(s).shard_gradient(b, ElementRange{b.offset, b.numel});
    const auto* shard = static_cast<const float*>(g.data);
    for (std::int64_t i : padding) {
      INFO("step " << step << " padding element " << i);
      REQUIRE(shard[i] == 0.0f);
    }
    REQUIRE(s.after_backward().finite);
  }
}

TEST_CASE("the gradient shard sums every micro-batch's reduce-scatter, the first overwriting",
          "[gradient-pool]") {
  LoopbackStep s({.mode = mode_named("zero2/none/reduce_scatter_allgather"), .grad_accum = 3});
  for (int step = 0; step < 2; ++step) {
    for (std::int64_t m = 0; m < 3; ++m) {
      s.forward();
      s.backward(MicroBatch{.index = m, .count = 3});
    }
    s.parts.reducer.wait_collectives(s.compute());
    for (const Bucket& b : s.plan.buckets) {
      const auto* shard = static_cast<const float*>(
          pool_of(s).shard_gradient(b, ElementRange{b.offset, b.numel}).data);
      for (int id : b.param_ids) {
        const ParameterInfo& p = s.store.info(id);
        for (std::int64_t i = 0; i < p.numel; ++i) {
          float want = test_gradient(id, i, 0, step);
          want += test_gradient(id, i, 1, step);
          want += test_gradient(id, i, 2, step);
          INFO("step " << step << " " << p.name << "[" << i << "]");
          REQUIRE(shard[p.offset - b.offset + i] == want);
        }
      }
    }
    REQUIRE(s.after_backward().finite);
  }
}
