// The two-tier modelled link on 2 ranks (Note [Link model], runtime/comm/link/simulated_link.h): a
// world all-reduce is timed at the bandwidth between nodes when each rank is its own node and at
// the one inside a node when both share one; the tiers are separate links (Note [Link
// occupancy]); the bench's limits measure each tier. Times are bandwidth-dominated and far above
// the real collective's, with loose upper bounds, so they hold on a loaded machine.
#include <mpi.h>

#include <chrono>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "base/clock.h"
#include "runtime/bench/bench_limits.h"
#include "runtime/comm/backends/mpi_communicator.h"
#include "runtime/comm/link/simulated_link.h"
#include "tests/mpi/mpi_test_util.h"

using namespace zl;

namespace {

// 256 KiB: 1.6 s at 0.00131072 Gb/s between nodes, 0.4 s at 4x that inside one.
constexpr std::int64_t kFloats = 1 << 16;
constexpr std::int64_t kBytes = kFloats * 4;
constexpr double kInterS = 1.6, kIntraS = 0.4;

LinkConfig tiers(int node_ranks) {
  LinkConfig link;
  link.bandwidth_gbps = kBytes * 8 / kInterS * 1e-9;
  link.intra_gbps = kBytes * 8 / kIntraS * 1e-9;
  link.node_ranks = node_ranks;
  return link;
}

// The all-reduce's busy seconds on a flat communicator of the world through `link`.
double timed_all_reduce(const World& world, const LinkConfig& link, std::int64_t* wire) {
  const RankLinks links = make_rank_links(link);
  const LinkSpan span = flat_link_span(link, world.size);
  std::unique_ptr<Communicator> comm = with_simulated_link(
      std::make_unique<MpiCommunicator>(world.comm, "link.tiers", 60.0), links, span);
  std::vector<float> buf(static_cast<std::size_t>(kFloats), 1.0f);
  MPI_Barrier(world.comm);
  comm->all_reduce(buf.data(), kFloats, ReduceOp::Sum).wait();
  CHECK(buf.front() == 2.0f);  // the real all-reduce ran
  *wire = comm->stats().wire_bytes;
  return comm->stats().busy_seconds;
}

}  // namespace

TEST_CASE("a world all-reduce is timed between nodes of one rank, inside a node of two",
          "[link-tiers]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 2);
  for (const int node_ranks : {1, 2}) {
    INFO("link.node_ranks = " << node_ranks);
    const LinkConfig link = tiers(node_ranks);
    const LinkSpan span = flat_link_span(link, world.size);
    CHECK(span.ranks == 2);
    CHECK(span.tier == (node_ranks == 1 ? LinkTier::Inter : LinkTier::Intra));
    // 2 ranks: 2 (1/2) S / B, no latency.
    const double want = node_ranks == 1 ? kInterS : kIntraS;
    REQUIRE(modelled_seconds(link, CollectiveOp::AllReduce, kBytes, span) == Approx(want));
    std::int64_t wire = 0;
    const double busy = timed_all_reduce(world, link, &wire);
    CHECK(busy >= want - 1e-6);  // the reservation's end is rounded to the clock's tick
    CHECK(busy < 1.4 * want);  // inside a node at most 0.56 s: not the 1.6 s between nodes
    CHECK(wire == kBytes);     // 2 (p-1)/p S
  }
}

TEST_CASE("a rank's two tiers are separate links: an intra-node collective does not queue "
          "behind an inter-node one",
          "[link-tiers]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 2);
  const LinkConfig link = tiers(2);
  const RankLinks links = make_rank_links(link);
  // Both communicators hold both ranks; one is timed as if its ranks sat in two nodes.
  std::unique_ptr<Communicator> across = with_simulated_link(
      std::make_unique<MpiCommunicator>(world.comm, "link.across", 60.0), links,
      LinkSpan{2, LinkTier::Inter});
  std::unique_ptr<Communicator> inside = with_simulated_link(
      std::make_unique<MpiCommunicator>(world.comm, "link.inside", 60.0), links,
      LinkSpan{2, LinkTier::Intra});
  std::vector<float> a(static_cast<std::size_t>(kFloats), 1.0f), b = a;
  MPI_Barrier(world.comm);
  const auto start = Clock::now();
  Work slow = across->all_reduce(a.data(), kFloats, ReduceOp::Sum);
  Work fast = inside->all_reduce(b.data(), kFloats, ReduceOp::Sum);
  fast.wait();
  // One shared link would end it after both transfers, 2.0 s.
  const double fast_s = seconds_since(start);
  slow.wait();
  CHECK(fast_s >= kIntraS - 1e-6);
  CHECK(fast_s < 0.5 * (kIntraS + kInterS));
  CHECK(seconds_since(start) >= kInterS - 1e-6);
}

TEST_CASE("the bench's limits measure each tier", "[link-tiers]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 2);
  // 2 real ranks of a 4-rank study in nodes of 2: the world is timed as 4 ranks in two nodes, a
  // node (both real ranks here) as 2 ranks inside one. 20 ms per hop, so each figure is far above
  // the real collective of 4 KiB.
  Config config = parse_config(
      "[model]\nwidths = [2, 8, 3]\n[data]\nkind = \"spirals\"\n[link]\nbandwidth_gbps = 1\n"
      "intra_gbps = 10\nlatency_us = 20000\nranks = 4\nnode_ranks = 2\n",
      "tiers.toml");
  const std::int64_t bytes = 4096;
  const BenchLimits limits =
      measure_limits(config, Device(config.runtime.device, world), world, {config.precision},
                     {{"all_reduce", DType::F32, bytes}});
  REQUIRE(limits.collectives.size() == 2);
  CHECK(limits.flat_tier == LinkTier::Inter);
  const CollectiveLimit& between = limits.collectives[0];
  const CollectiveLimit& inside = limits.collectives[1];
  CHECK(between.tier == LinkTier::Inter);
  CHECK(between.ranks == 4);
  CHECK(inside.tier == LinkTier::Intra);
  CHECK(inside.ranks == 2);
  // 6 hops and 2 hops of 20 ms, plus the bytes.
  CHECK(between.seconds >= modelled_seconds(config.link, CollectiveOp::AllReduce, bytes,
                                            LinkSpan{4, LinkTier::Inter}));
  CHECK(inside.seconds >= modelled_seconds(config.link, CollectiveOp::AllReduce, bytes,
                                           LinkSpan{2, LinkTier::Intra}));
  CHECK(inside.seconds < between.seconds);
  // The lookup the ideal step makes for a flat mode's communicator (the job's 2 ranks, stride 1)
  // finds the world's time. (The node's record has that shape too here, as both real ranks are
  // one node; the world's comes first.)
  CHECK(limits.collective_seconds("all_reduce", DType::F32, bytes, 2, 1) == between.seconds);
}
