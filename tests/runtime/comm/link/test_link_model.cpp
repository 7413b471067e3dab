// The two-tier link model (Note [Link model], runtime/comm/link/simulated_link.h): the spans of
// flat, group and cross-replica communicators, their times against hand computations, the world
// check of link.node_ranks, and a rank's links per tier.
#include <catch2/catch.hpp>

#include "base/errors.h"
#include "runtime/comm/link/simulated_link.h"

using namespace zl;

namespace {

constexpr std::int64_t kGB = 1'000'000'000;

// 1 GB/s between nodes, 10 GB/s inside one, 10 us per hop.
LinkConfig two_tiers(int node_ranks) {
  LinkConfig link{8.0, 10.0};
  link.node_ranks = node_ranks;
  link.intra_gbps = 80.0;
  return link;
}

bool same(LinkSpan a, LinkSpan b) { return a.ranks == b.ranks && a.tier == b.tier; }

}  // namespace

TEST_CASE("a communicator's span: its modelled members and whether they share a node",
          "[link_model]") {
  const LinkSpan inter4{4, LinkTier::Inter}, intra2{2, LinkTier::Intra};
  SECTION("one tier: every span between nodes, the flat one the modelled world") {
    LinkConfig link{8.0, 10.0};
    CHECK(same(flat_link_span(link, 4), inter4));
    CHECK(same(link_span(link, 8, 2, 1), LinkSpan{2, LinkTier::Inter}));
    link.ranks = 64;
    CHECK(same(flat_link_span(link, 1), LinkSpan{64, LinkTier::Inter}));
  }
  SECTION("nodes of 2 in a world of 8: groups of 2 inside, of 4 across, replicas across") {
    const LinkConfig link = two_tiers(2);
    CHECK(same(flat_link_span(link, 8), LinkSpan{8, LinkTier::Inter}));
    CHECK(same(link_span(link, 8, 2, 1), intra2));
    CHECK(same(link_span(link, 8, 4, 1), inter4));
    CHECK(same(link_span(link, 8, 4, 2), inter4));  // one rank of each group of 2
    CHECK(same(link_span(link, 8, 1, 1), LinkSpan{1, LinkTier::Intra}));  // never timed
  }
  SECTION("a node of the whole world: everything inside") {
    const LinkConfig link = two_tiers(8);
    CHECK(same(flat_link_span(link, 8), LinkSpan{8, LinkTier::Intra}));
    CHECK(same(link_span(link, 8, 4, 2), LinkSpan{4, LinkTier::Intra}));  // ranks 0, 2, 4, 6
    CHECK(same(flat_link_span(two_tiers(2), 2), intra2));
    CHECK(same(flat_link_span(two_tiers(1), 2), LinkSpan{2, LinkTier::Inter}));
  }
  SECTION("nodes of 4: a replica communicator of stride 2 spreads over 8 ranks, two nodes") {
    const LinkConfig link = two_tiers(4);
    CHECK(same(link_span(link, 8, 2, 1), intra2));
    CHECK(same(link_span(link, 8, 4, 1), LinkSpan{4, LinkTier::Intra}));
    CHECK(same(link_span(link, 8, 4, 2), inter4));
    CHECK(same(link_span(link, 4, 2, 2), LinkSpan{2, LinkTier::Intra}));  // world 4: one node
  }
  SECTION("the link.ranks study: 16 real ranks of 64 in nodes of 8") {
    LinkConfig link = two_tiers(8);
    link.ranks = 64;
    CHECK(same(flat_link_span(link, 16), LinkSpan{64, LinkTier::Inter}));     // 8 nodes
    CHECK(same(link_span(link, 16, 8, 1), LinkSpan{8, LinkTier::Intra}));     // a group keeps 8
    CHECK(same(link_span(link, 16, 2, 8), LinkSpan{8, LinkTier::Inter}));     // 64 / 8 replicas
    CHECK(same(link_span(link, 16, 4, 1), LinkSpan{4, LinkTier::Intra}));
  }
  SECTION("members that do not tile the world are a bug of the caller") {
    CHECK_THROWS_AS(link_span(two_tiers(2), 6, 4, 1), InternalError);
    CHECK_THROWS_AS(link_span(two_tiers(2), 8, 2, 3), InternalError);
    LinkConfig study = two_tiers(2);
    study.ranks = 6;
    CHECK_THROWS_AS(link_span(study, 4, 1, 4), InternalError);  // 6 modelled ranks, groups of 4
  }
}

TEST_CASE("the two tiers' ring times, by hand", "[link_model]") {
  const LinkConfig link = two_tiers(2);
  // All-reduce of 1 GB on 2 ranks of one node: 2 (1/2) 1 GB / 10 GB/s + 2 x 10 us.
  CHECK(modelled_seconds(link, CollectiveOp::AllReduce, kGB, flat_link_span(link, 2)) ==
        Approx(0.1 + 20e-6));
  // The same 2 ranks, each its own node: at 1 GB/s.
  CHECK(modelled_seconds(two_tiers(1), CollectiveOp::AllReduce, kGB, 2) == Approx(1.0 + 20e-6));
  // Reduce-scatter of 1 GB on 4 ranks in two nodes of 2: (3/4) 1 GB / 1 GB/s + 3 x 10 us.
  CHECK(modelled_seconds(link, CollectiveOp::ReduceScatter, kGB, flat_link_span(link, 4)) ==
        Approx(0.75 + 30e-6));
  // The groups of 2 in that world: (1/2) 1 GB / 10 GB/s + 10 us, for each of the sharded ops.
  for (const CollectiveOp op : {CollectiveOp::ReduceScatter, CollectiveOp::AllGather,
                                CollectiveOp::Reduce, CollectiveOp::Broadcast}) {
    CHECK(modelled_seconds(link, op, kGB, link_span(link, 4, 2, 1)) == Approx(0.05 + 10e-6));
  }
  // 8 real ranks of a 64-rank study in nodes of 8: the flat all-reduce
  // 2 (63/64) 1 GB / 1 GB/s + 126 x 10 us; a node's group 2 (7/8) / 10 GB/s + 14 x 10 us; the
  // 8 replicas (stride 8 over the 64) 2 (7/8) / 1 GB/s + 14 x 10 us.
  LinkConfig study = two_tiers(8);
  study.ranks = 64;
  CHECK(modelled_seconds(study, CollectiveOp::AllReduce, kGB, flat_link_span(study, 8)) ==
        Approx(1.96875 + 1.26e-3));
  CHECK(modelled_seconds(study, CollectiveOp::AllReduce, kGB, LinkSpan{8, LinkTier::Intra}) ==
        Approx(0.175 + 140e-6));
  CHECK(modelled_seconds(study, CollectiveOp::AllReduce, kGB, link_span(study, 16, 2, 8)) ==
        Approx(1.75 + 140e-6));
  // One rank: nothing to send, on either tier; host tasks cost nothing.
  CHECK(modelled_seconds(link, CollectiveOp::AllReduce, kGB, LinkSpan{1, LinkTier::Intra}) == 0.0);
  CHECK(modelled_seconds(link, CollectiveOp::HostTask, kGB, LinkSpan{4, LinkTier::Inter}) == 0.0);
}

TEST_CASE("without link.node_ranks the times are bitwise the one-tier formula", "[link_model]") {
  LinkConfig link{3.7, 4.3};
  for (int ranks : {0, 7}) {
    link.ranks = ranks;
    for (int world : {1, 2, 3, 5, 8}) {
      const int p = ranks > 0 ? ranks : world;
      for (const CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::Reduce,
                                    CollectiveOp::Broadcast, CollectiveOp::ReduceScatter,
                                    CollectiveOp::AllGather}) {
        const std::int64_t payload = 123'456'789;
        // The formula as it stood with one tier (Note [Link model]).
        const double hops = op == CollectiveOp::AllReduce ? 2.0 * (p - 1) : 1.0 * (p - 1);
        const double want =
            p <= 1 ? 0.0
                   : static_cast<double>(wire_bytes(op, payload, p)) / (3.7 * 1e9 / 8.0) +
                         hops * 4.3 * 1e-6;
        CHECK(modelled_seconds(link, op, payload, world) == want);
        CHECK(modelled_seconds(link, op, payload, flat_link_span(link, world)) == want);
      }
    }
  }
}

TEST_CASE("link.node_ranks must divide the modelled ranks", "[link_model]") {
  CHECK_NOTHROW(check_link_world(LinkConfig{8.0, 0.0}, 3, "c.toml"));  // one tier: any world
  CHECK_NOTHROW(check_link_world(two_tiers(2), 4, "c.toml"));
  CHECK_THROWS_WITH(check_link_world(two_tiers(3), 4, "c.toml"),
                    Catch::StartsWith("c.toml: link.node_ranks = 3 does not divide the 4 ranks "
                                      "the link models (the world size)"));
  LinkConfig study = two_tiers(8);
  study.ranks = 64;
  CHECK_NOTHROW(check_link_world(study, 1, "c.toml"));  // 8 nodes of 8, one rank running
  study.node_ranks = 6;
  CHECK_THROWS_AS(check_link_world(study, 1, "c.toml"), UserError);
  CHECK_THROWS_WITH(check_link_world(study, 1, "c.toml"),
                    Catch::Contains("the 64 ranks the link models (link.ranks)"));
}

TEST_CASE("a rank has one link per tier; the label names both", "[link_model]") {
  const RankLinks off = make_rank_links(LinkConfig{});
  CHECK(!off.inter);
  CHECK(!off.intra);
  CHECK(!off.of(LinkTier::Intra));  // the link is off: nothing wraps
  const RankLinks one = make_rank_links(LinkConfig{8.0, 10.0});
  REQUIRE(one.inter);
  CHECK(!one.intra);
  CHECK_THROWS_AS(one.of(LinkTier::Intra), InternalError);
  const RankLinks both = make_rank_links(two_tiers(2), 5.0);
  REQUIRE(both.inter);
  REQUIRE(both.intra);
  CHECK(both.inter != both.intra);
  CHECK(both.of(LinkTier::Inter)->tier() == LinkTier::Inter);
  CHECK(both.of(LinkTier::Intra)->tier() == LinkTier::Intra);
  CHECK(both.intra->timeout_s() == 5.0);

  CHECK(link_label(LinkConfig{0.0, 50.0}) == "simulated link: unlimited bandwidth, 50 us");
  LinkConfig link{400.0, 5.0};
  CHECK(link_label(link) == "simulated link: 400 Gb/s, 5 us");
  link.node_ranks = 8;
  link.intra_gbps = 3600.0;
  CHECK(link_label(link) == "simulated link: 400 Gb/s between nodes of 8 ranks, 3600 Gb/s "
                            "inside, 5 us");
  link.ranks = 64;
  CHECK(link_label(link) == "simulated link: 400 Gb/s between nodes of 8 ranks, 3600 Gb/s "
                            "inside, 5 us, timed as 64 ranks");
  CHECK(describe_tier(link, LinkTier::Intra) == "link.latency_us = 5, link.intra_gbps = 3600");
  CHECK(describe_tier(link, LinkTier::Inter) == "link.latency_us = 5, link.bandwidth_gbps = 400");
}
