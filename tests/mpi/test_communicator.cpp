// MPI communicator semantics: results, in-order completion with callbacks that issue collectives on
// a second communicator, and timeouts instead of hangs.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "base/bf16.h"
#include "base/errors.h"
#include "runtime/comm/backends/mpi_communicator.h"
#include "runtime/comm/thread_priority.h"
#include "runtime/comm/world.h"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

using namespace zl;

TEST_CASE("collectives compute sums, reductions to a root and broadcasts", "[comm]") {
  const World world = describe_world();
  MpiCommunicator comm(world.comm, "test", 60.0);
  std::vector<float> a(1000), r(77), b(33);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(world.rank + 1) * i;
  for (auto& x : r) x = static_cast<float>(world.rank + 1);
  for (auto& x : b) x = world.rank == world.size - 1 ? 7.5f : -1.0f;
  auto w1 = comm.all_reduce(a.data(), static_cast<std::int64_t>(a.size()), ReduceOp::Sum);
  auto w2 = comm.reduce(r.data(), static_cast<std::int64_t>(r.size()), 0, ReduceOp::Average);
  auto w3 = comm.broadcast(b.data(), static_cast<std::int64_t>(b.size()), world.size - 1);
  w3.wait();  // completion is in issue order: w1 and w2 are done too
  CHECK(w1.is_done());
  CHECK(w2.is_done());
  const float ranks_sum = world.size * (world.size + 1) / 2.0f;
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == ranks_sum * i);
  const float expected_r = world.rank == 0 ? ranks_sum / world.size : world.rank + 1.0f;
  for (float x : r) REQUIRE(x == Approx(expected_r));
  for (float x : b) REQUIRE(x == 7.5f);
  const CommStats stats = comm.stats();
  CHECK(stats.ops == 3);
  CHECK(stats.payload_bytes == static_cast<std::int64_t>((a.size() + r.size() + b.size()) * 4));
}

TEST_CASE("bf16 collectives: sums round in fp32 per partial sum, every rank gets the same bits",
          "[comm]") {
  const World world = describe_world();
  MpiCommunicator comm(world.comm, "bf16", 60.0);
  // Exact case: small integers, whose sums bf16 represents exactly (< 256).
  std::vector<Bf16> exact(1001), root(77), bcast(33);
  for (std::size_t i = 0; i < exact.size(); ++i) {
    exact[i] = float_to_bf16(static_cast<float>((world.rank + 1) * (i % 17)));
  }
  for (auto& x : root) x = float_to_bf16(static_cast<float>(world.rank + 1));
  for (auto& x : bcast) x = float_to_bf16(world.rank == world.size - 1 ? 7.5f : -1.0f);
  const auto n = [](const std::vector<Bf16>& v) { return static_cast<std::int64_t>(v.size()); };
  comm.all_reduce(exact.data(), n(exact), DType::BF16, ReduceOp::Sum);
  comm.reduce(root.data(), n(root), DType::BF16, 0, ReduceOp::Sum);
  comm.broadcast(bcast.data(), n(bcast), DType::BF16, world.size - 1).wait();
  const float ranks_sum = world.size * (world.size + 1) / 2.0f;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    REQUIRE(bf16_to_float(exact[i]) == ranks_sum * static_cast<float>(i % 17));
  }
  for (const Bf16 x : root) REQUIRE(bf16_to_float(x) == (world.rank == 0 ? ranks_sum : world.rank + 1.0f));
  for (const Bf16 x : bcast) REQUIRE(bf16_to_float(x) == 7.5f);
  CHECK(comm.stats().payload_bytes == (n(exact) + n(root) + n(bcast)) * 2);

  // Inexact case: random values; each partial sum rounds to bf16, so the result is the fp32 sum
  // within (world - 1) roundings of 2^-9 relative each; and it is bitwise the same on every rank.
  std::vector<Bf16> x(4099);
  std::vector<float> exact_sum(x.size(), 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) {
    for (int r = 0; r < world.size; ++r) {
      const float v = round_to_bf16(std::sin(0.37f * static_cast<float>(i) + static_cast<float>(r)));
      exact_sum[i] += v;
      if (r == world.rank) x[i] = float_to_bf16(v);
    }
  }
  comm.all_reduce(x.data(), n(x), DType::BF16, ReduceOp::Sum).wait();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double tol = (world.size - 1) * std::ldexp(1.0, -8) * world.size;  // |terms| <= 1
    REQUIRE(std::abs(bf16_to_float(x[i]) - exact_sum[i]) <= tol);
  }
  std::vector<std::uint16_t> mine(x.size()), first(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) mine[i] = first[i] = x[i].bits;
  MPI_Bcast(first.data(), static_cast<int>(first.size()), MPI_UINT16_T, 0, world.comm);
  CHECK(mine == first);

  // Average is fp32 only: bf16 reductions are sums.
  REQUIRE_THROWS_AS(comm.all_reduce(x.data(), n(x), DType::BF16, ReduceOp::Average), InternalError);
}

TEST_CASE("reduce_scatter and all_gather run in place on equal shards of the whole buffer",
          "[comm]") {
  const World world = describe_world();
  MpiCommunicator comm(world.comm, "shards", 60.0);
  const float ranks_sum = world.size * (world.size + 1) / 2.0f;
  // Odd shard lengths too, and an empty buffer; every rank's shard in every position.
  for (const std::int64_t shard : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7},
                                   std::int64_t{16}, std::int64_t{1001}}) {
    INFO("shard " << shard);
    const std::int64_t n = shard * world.size;
    const auto value = [](std::int64_t i) { return static_cast<float>(i % 97); };
    std::vector<float> buf(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) buf[i] = static_cast<float>(world.rank + 1) * value(i);
    comm.reset_stats();
    comm.reduce_scatter(buf.data(), n, DType::F32, ReduceOp::Sum).wait();
    for (std::int64_t i = 0; i < n; ++i) {
      const bool mine = i / shard == world.rank;  // the rest is left as it was
      REQUIRE(buf[i] == (mine ? ranks_sum : static_cast<float>(world.rank + 1)) * value(i));
    }
    // The all-gather reads only each rank's own shard: the rest of buf is garbage here.
    for (std::int64_t i = 0; i < n; ++i) {
      const bool mine = i / std::max<std::int64_t>(shard, 1) == world.rank;
      buf[i] = mine ? static_cast<float>(1000 * world.rank) + value(i) : -1.0f;
    }
    comm.all_gather(buf.data(), n, DType::F32).wait();
    for (std::int64_t i = 0; i < n; ++i) {
      REQUIRE(buf[i] == static_cast<float>(1000 * (i / shard)) + value(i));
    }
    // all_gather_from reads the rank's shard from elsewhere; buf starts as garbage everywhere.
    std::vector<float> own(static_cast<std::size_t>(shard));
    for (std::int64_t i = 0; i < shard; ++i) {
      own[i] = static_cast<float>(2000 * world.rank) + value(world.rank * shard + i);
    }
    std::fill(buf.begin(), buf.end(), -1.0f);
    comm.all_gather_from(own.data(), buf.data(), n, DType::F32).wait();
    for (std::int64_t i = 0; i < n; ++i) {
      REQUIRE(buf[i] == static_cast<float>(2000 * (i / shard)) + value(i));
    }
    const CommStats stats = comm.stats();
    CHECK(stats.ops == 3);
    CHECK(stats.payload_bytes == 3 * n * 4);  // the whole buffer, all shards
    CHECK(stats.wire_bytes == 3 * wire_bytes(CollectiveOp::ReduceScatter, n * 4, world.size));
  }

  // Average divides this rank's shard.
  std::vector<float> avg(static_cast<std::size_t>(3 * world.size), static_cast<float>(world.rank));
  comm.reduce_scatter(avg.data(), 3 * world.size, DType::F32, ReduceOp::Average).wait();
  for (int i = 0; i < 3; ++i) CHECK(avg[3 * world.rank + i] == Approx((world.size - 1) / 2.0));

  // A buffer that does not split into equal shards is a caller's bug.
  if (world.size > 1) {
    std::vector<float> odd(static_cast<std::size_t>(world.size + 1));
    CHECK_THROWS_AS(comm.reduce_scatter(odd.data(), world.size + 1, DType::F32, ReduceOp::Sum),
                    InternalError);
    CHECK_THROWS_AS(comm.all_gather(odd.data(), world.size + 1, DType::F32), InternalError);
    CHECK_THROWS_AS(comm.all_gather_from(odd.data(), odd.data(), world.size + 1, DType::F32),
                    InternalError);
  }
}

TEST_CASE("bf16 reduce_scatter sums in fp32 per partial sum; all_gather moves the bits", "[comm]") {
  const World world = describe_world();
  MpiCommunicator comm(world.comm, "bf16.shards", 60.0);
  const float ranks_sum = world.size * (world.size + 1) / 2.0f;
  const std::int64_t shard = 333;  // odd: shards start at odd bf16 offsets
  const std::int64_t n = shard * world.size;
  // Exact: small integers, whose sums bf16 holds exactly.
  std::vector<Bf16> exact(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    exact[i] = float_to_bf16(static_cast<float>((world.rank + 1) * (i % 17)));
  }
  comm.reduce_scatter(exact.data(), n, DType::BF16, ReduceOp::Sum).wait();
  for (std::int64_t i = world.rank * shard; i < (world.rank + 1) * shard; ++i) {
    REQUIRE(bf16_to_float(exact[i]) == ranks_sum * static_cast<float>(i % 17));
  }
  // Inexact: within (world - 1) roundings of 2^-9 relative each, as the all-reduce.
  std::vector<Bf16> x(static_cast<std::size_t>(n));
  std::vector<float> exact_sum(x.size(), 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < world.size; ++r) {
      const float v =
          round_to_bf16(std::sin(0.37f * static_cast<float>(i) + static_cast<float>(r)));
      exact_sum[i] += v;
      if (r == world.rank) x[i] = float_to_bf16(v);
    }
  }
  comm.reduce_scatter(x.data(), n, DType::BF16, ReduceOp::Sum).wait();
  const double tol = (world.size - 1) * std::ldexp(1.0, -8) * world.size;  // |terms| <= 1
  for (std::int64_t i = world.rank * shard; i < (world.rank + 1) * shard; ++i) {
    REQUIRE(std::abs(bf16_to_float(x[i]) - exact_sum[i]) <= tol);
  }
  // The gathered buffer is bitwise every rank's shard, the same on every rank.
  comm.all_gather(x.data(), n, DType::BF16).wait();
  std::vector<std::uint16_t> mine(x.size()), first(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) mine[i] = first[i] = x[i].bits;
  MPI_Bcast(first.data(), static_cast<int>(first.size()), MPI_UINT16_T, 0, world.comm);
  CHECK(mine == first);
  for (std::int64_t i = 0; i < n; ++i) {
    REQUIRE(std::abs(bf16_to_float(x[i]) - exact_sum[i]) <= tol);
  }
  CHECK_THROWS_AS(comm.reduce_scatter(x.data(), n, DType::BF16, ReduceOp::Average), InternalError);
}

TEST_CASE("callbacks run in issue order and may issue collectives on another communicator",
          "[comm]") {
  const World world = describe_world();
  MpiCommunicator reduce_comm(world.comm, "reduce", 60.0);
  MpiCommunicator bcast_comm(world.comm, "bcast", 60.0);
  constexpr int kOps = 200;
  std::vector<std::vector<float>> grads(kOps), params(kOps);
  std::vector<Work> bcast_work(kOps), callback_work(kOps);
  std::mutex order_mutex;
  std::vector<int> callback_order;
  for (int i = 0; i < kOps; ++i) {
    // Sizes vary so MPI could finish small operations before large earlier ones.
    const std::size_t n = i % 7 == 0 ? 20000 : 1 + static_cast<std::size_t>(i % 13);
    grads[i].assign(n, 1.0f);
    params[i].assign(n, world.rank == i % world.size ? static_cast<float>(i) : -1.0f);
    reduce_comm.all_reduce(grads[i].data(), static_cast<std::int64_t>(n), ReduceOp::Sum);
    callback_work[i] = reduce_comm.then([&, i](const ExecContext& stream) {
      {
        std::lock_guard lock(order_mutex);
        callback_order.push_back(i);
      }
      REQUIRE(grads[i][0] == static_cast<float>(world.size));  // its collective is complete
      bcast_work[i] = bcast_comm.broadcast(params[i].data(),
                                           static_cast<std::int64_t>(params[i].size()),
                                           i % world.size, &stream);
    });
  }
  for (int i = 0; i < kOps; ++i) {
    callback_work[i].wait();
    bcast_work[i].wait();
  }
  REQUIRE(callback_order.size() == kOps);
  for (int i = 0; i < kOps; ++i) REQUIRE(callback_order[i] == i);
  for (int i = 0; i < kOps; ++i) {
    for (float x : params[i]) REQUIRE(x == static_cast<float>(i));
  }
}

TEST_CASE("comm_priority = realtime runs the comm thread under SCHED_FIFO where permitted; "
          "comm threads sleep with a 1 us timer slack",
          "[comm]") {
  const World world = describe_world();
  const bool permitted = realtime_refusal().empty();  // CAP_SYS_NICE or `ulimit -r` >= 1
  const auto policy_and_slack = [](MpiCommunicator& comm) {
    int policy = -1;
    int slack_ns = -1;
    comm.then([&](const ExecContext&) {
          sched_param param{};
          pthread_getschedparam(pthread_self(), &policy, &param);
          slack_ns = prctl(PR_GET_TIMERSLACK);
        })
        .wait();
    return std::pair{policy, slack_ns};
  };
  int main_policy = -1;
  sched_param main_param{};
  pthread_getschedparam(pthread_self(), &main_policy, &main_param);

  MpiCommunicator realtime(world.comm, "realtime", 60.0, CommPriority::Realtime);
  CHECK(policy_and_slack(realtime).first == (permitted ? SCHED_FIFO : main_policy));
  // Collectives are unaffected.
  std::vector<float> a(5000, static_cast<float>(world.rank + 1));
  realtime.all_reduce(a.data(), 5000, ReduceOp::Sum).wait();
  for (float x : a) REQUIRE(x == world.size * (world.size + 1) / 2.0f);

  MpiCommunicator normal(world.comm, "normal", 60.0);
  const auto [policy, slack_ns] = policy_and_slack(normal);
  CHECK(policy == main_policy);  // a new thread inherits the creator's policy
  CHECK(slack_ns == 1000);       // Note [Polling back-off]: the back-off's sleeps are not stretched
}

TEST_CASE("a collective a peer never joins times out instead of hanging", "[comm-timeout]") {
  const World world = describe_world();
  REQUIRE(world.size >= 2);
  MpiCommunicator comm(world.comm, "timeout", 0.5);
  std::vector<float> x(16, 1.0f);
  if (world.rank == 0) {
    const auto start = std::chrono::steady_clock::now();
    auto work = comm.all_reduce(x.data(), 16, ReduceOp::Sum);
    REQUIRE_THROWS_AS(work.wait(), RuntimeFailure);
    REQUIRE_THROWS_WITH(comm.then([](const ExecContext&) {}).wait(),
                        Catch::Contains("did not complete within"));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  }
  MPI_Barrier(world.comm);
  // The other ranks join late, so rank 0's abandoned all-reduce completes (progressed by rank 0's
  // barrier below) and MPI shuts down cleanly.
  if (world.rank != 0) comm.all_reduce(x.data(), 16, ReduceOp::Sum).wait();
  MPI_Barrier(world.comm);
}

TEST_CASE("a reduce_scatter or all_gather a peer never joins times out instead of hanging",
          "[comm-timeout]") {
  const World world = describe_world();
  REQUIRE(world.size >= 2);
  // One communicator each: a failed collective poisons its stream (cpu_stream.h).
  MpiCommunicator scatter(world.comm, "timeout.scatter", 0.5);
  MpiCommunicator gather(world.comm, "timeout.gather", 0.5);
  std::vector<float> x(static_cast<std::size_t>(4 * world.size), 1.0f);
  std::vector<float> y(x.size(), 1.0f);
  const auto n = static_cast<std::int64_t>(x.size());
  if (world.rank == 0) {
    const auto start = std::chrono::steady_clock::now();
    Work s = scatter.reduce_scatter(x.data(), n, DType::F32, ReduceOp::Sum);
    Work g = gather.all_gather(y.data(), n, DType::F32);
    REQUIRE_THROWS_WITH(s.wait(), Catch::Contains("rank 0: reduce_scatter") &&
                                      Catch::Contains("did not complete within"));
    REQUIRE_THROWS_WITH(g.wait(), Catch::Contains("rank 0: all_gather") &&
                                      Catch::Contains("did not complete within"));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  }
  MPI_Barrier(world.comm);
  // The others join late, so rank 0's abandoned operations complete and MPI shuts down cleanly.
  if (world.rank != 0) {
    scatter.reduce_scatter(x.data(), n, DType::F32, ReduceOp::Sum).wait();
    gather.all_gather(y.data(), n, DType::F32).wait();
  }
  MPI_Barrier(world.comm);
}
