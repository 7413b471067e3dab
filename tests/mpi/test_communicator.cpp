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
#include "runtime/comm/mpi_communicator.h"
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
