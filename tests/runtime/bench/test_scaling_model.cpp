// The scaling model of `zerolap plan` (runtime/bench/scaling_model.h; per tier of a two-tier link
// and with hybrid sharding's replicas) and the link model with link.ranks
// (runtime/comm/link/simulated_link.h), against hand computations.
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "models/model.h"
#include "runtime/bench/scaling_model.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/config/config.h"
#include "runtime/config/mode.h"
#include "tests/runtime/cli/cli_test_util.h"

using namespace zl;

namespace {

// Two buckets of 1 MB and 3 MB (the last one, holding the first layers), owned by ranks 0 and 1.
BucketPlan two_buckets(int world) {
  BucketPlan plan;
  plan.world_size = world;
  Bucket a;
  a.index = 0;
  a.numel = 250'000;
  Bucket b;
  b.index = 1;
  b.offset = a.numel;
  b.numel = 750'000;
  b.assigned_rank = 1;
  plan.buckets = {a, b};
  return plan;
}

ModePlan mode_named(const std::string& name, int grad_accum = 1) {
  const Config config = parse_config("[model]\nwidths = [2, 8, 3]\n[data]\nkind = \"spirals\"\n",
                                     "c.toml", {fmt::format("train.grad_accum={}", grad_accum)});
  for (const ModePlan& m : all_mode_plans(config)) {
    if (m.name() == name) return m;
  }
  FAIL("no mode " << name);
  return {};
}

// A mode by name (hybrid ones too: hsdp<stage>/<overlap>@G), replicas 1 as all_mode_plans.
ModePlan any_mode_named(const std::string& name) {
  const Config config =
      parse_config("[model]\nwidths = [2, 8, 3]\n[data]\nkind = \"spirals\"\n", "c.toml");
  const std::optional<Mode> mode = parse_mode(name);
  REQUIRE(mode);
  return make_mode_plan(*mode, config.parallel, config.optimizer, config.precision);
}

// Compute split as two_buckets' bytes: backward `share` of it, a quarter of that in bucket 0.
ComputeShares shares_of(double share) { return ComputeShares{share, {0.25, 0.75}}; }

// Two tiers: 1 GB/s per rank between nodes of 2 ranks, 4 GB/s inside one, no latency.
LinkConfig two_tiers(int node_ranks = 2) {
  LinkConfig link{8.0, 0.0};
  link.node_ranks = node_ranks;
  link.intra_gbps = 32.0;
  return link;
}

}  // namespace

TEST_CASE("link.ranks times collectives as that many ranks, also in a one-rank job", "[scaling]") {
  LinkConfig link{8.0, 10.0};  // 1 GB/s, 10 us per hop
  CHECK(modelled_seconds(link, CollectiveOp::AllReduce, 1'000'000, 1) == 0.0);
  link.ranks = 8;
  CHECK(modelled_ranks(link, 1) == 8);
  // 2 (p-1)/p S/B + 2 (p-1) alpha = 1.75 ms + 140 us, whatever the real world size.
  CHECK(modelled_seconds(link, CollectiveOp::AllReduce, 1'000'000, 1) == Approx(1.75e-3 + 140e-6));
  CHECK(modelled_seconds(link, CollectiveOp::AllReduce, 1'000'000, 4) == Approx(1.75e-3 + 140e-6));
  CHECK(modelled_seconds(link, CollectiveOp::Reduce, 1'000'000, 1) == Approx(0.875e-3 + 70e-6));
  CHECK(modelled_seconds(link, CollectiveOp::Broadcast, 1'000'000, 1) == Approx(0.875e-3 + 70e-6));
  CHECK(link_label(link) == "simulated link: 8 Gb/s, 10 us, timed as 8 ranks");
}

TEST_CASE("link.ranks needs a link to model", "[scaling]") {
  const char* config = "[model]\nwidths = [2, 8, 3]\n[data]\nkind = \"spirals\"\n";
  CHECK_THROWS_WITH(parse_config(config, "c.toml", {"link.ranks=8"}),
                    Catch::Contains("link.ranks") && Catch::Contains("bandwidth_gbps"));
  CHECK(parse_config(config, "c.toml", {"link.ranks=8", "link.bandwidth_gbps=100"}).link.ranks == 8);
}

TEST_CASE("each mode's modelled communication per step", "[scaling]") {
  const LinkConfig link{8.0, 0.0};  // 1 GB/s: 1 MB all-reduced on 4 ranks takes 1.5 ms
  const BucketPlan plan = two_buckets(4);
  const ModeComm ddp = modelled_mode_comm(mode_named("ddp"), plan, link, 4);
  CHECK(ddp.total_s == Approx(1.5e-3 + 4.5e-3));
  // Stage 3: reduce-scatter + forward gathers + backward gathers (bucket 0 stays resident between
  // forward and backward): more than ddp's bytes, at most 1.5x.
  const ModeComm three =
      modelled_mode_comm(mode_named("zero3/interleaved/reduce_scatter_allgather"), plan, link, 4);
  CHECK(three.wire_bytes > ddp.wire_bytes);
  CHECK(three.wire_bytes <= ddp.wire_bytes * 3 / 2);
  CHECK(ddp.last_s == Approx(4.5e-3));
  CHECK(ddp.broadcast_s == 0.0);
  CHECK(ddp.wire_bytes == 6'000'000);  // 2 (p-1)/p of 4 MB
  const ModeComm rb = modelled_mode_comm(mode_named("zero/none/reduce_broadcast"), plan, link, 4);
  CHECK(rb.reduce_s == Approx(0.75e-3 + 2.25e-3));
  CHECK(rb.reduce_last_s == Approx(2.25e-3));
  CHECK(rb.broadcast_s == Approx(0.75e-3 + 2.25e-3));
  CHECK(rb.last_s == Approx(4.5e-3));
  CHECK(rb.wire_bytes == 6'000'000);
  const ModeComm ab = modelled_mode_comm(mode_named("zero/none/allreduce_broadcast"), plan, link, 4);
  CHECK(ab.total_s == Approx(6e-3 + 3e-3));  // all-reduce then broadcast: 1.5x the wire bytes
}

TEST_CASE("with grad_accum, stages 2 and 3 count every micro-batch's collectives", "[scaling]") {
  // Stage 1 and ddp accumulate locally and reduce once; stage 2 reduce-scatters every
  // micro-batch, stage 3 also gathers in every micro-batch's forward and backward. Only the last
  // micro-batch's last bucket is C_last (nothing is left to hide it).
  const LinkConfig link{8.0, 0.0};
  const BucketPlan plan = two_buckets(4);
  for (const char* name : {"ddp", "zero/interleaved/reduce_scatter_allgather"}) {
    INFO(name);
    const ModeComm one = modelled_mode_comm(mode_named(name), plan, link, 4);
    const ModeComm three = modelled_mode_comm(mode_named(name, 3), plan, link, 4);
    CHECK(three.total_s == Approx(one.total_s));
    CHECK(three.wire_bytes == one.wire_bytes);
  }
  for (const char* name : {"zero2/none/reduce_scatter_allgather",
                           "zero3/interleaved/reduce_scatter_allgather"}) {
    INFO(name);
    const ModeComm one = modelled_mode_comm(mode_named(name), plan, link, 4);
    const ModeComm three = modelled_mode_comm(mode_named(name, 3), plan, link, 4);
    CHECK(three.reduce_s == Approx(3 * one.reduce_s));
    // Stage 2 all-gathers once, after the step; stage 3 gathers in every micro-batch, the last
    // bucket not again in forward after the first (it stays from the backward before), so the
    // last micro-batch's last-bucket collectives are one gather fewer.
    if (std::string(name).rfind("zero3", 0) == 0) {
      const double last_gather = modelled_seconds(link, CollectiveOp::AllGather,
                                                  plan.buckets.back().bytes(), 4);
      CHECK(three.broadcast_s == Approx(3 * one.broadcast_s - 2 * last_gather));
      CHECK(three.last_s == Approx(one.last_s - last_gather));
    } else {
      CHECK(three.broadcast_s == Approx(one.broadcast_s));
      CHECK(three.last_s == Approx(one.last_s));
    }
  }
  // Stage 3's collectives in issue order per communicator: the reduce-scatters of micro-batch 0
  // then 1, and on the other communicator each micro-batch's forward gathers (bucket 1 first)
  // then its backward gathers (bucket 0 stays resident from forward to backward, bucket 1 from
  // micro-batch 0's backward to micro-batch 1's forward).
  const std::vector<ProgramEntry> c =
      collective_program(mode_named("zero3/interleaved/reduce_scatter_allgather", 2), plan);
  std::vector<std::string> order;
  for (const ProgramEntry& x : c) {
    order.push_back(fmt::format("{}{}.{}", x.op == CollectiveOp::AllGather ? "G" : "R", x.bucket,
                                x.micro_batch));
  }
  CHECK(order == std::vector<std::string>{"R0.0", "R1.0", "R0.1", "R1.1", "G1.0", "G0.0", "G1.0",
                                          "G0.1", "G1.1"});
}

TEST_CASE("the predicted step of each mode against a hand computation", "[scaling]") {
  const LinkConfig link{8.0, 0.0};
  const BucketPlan plan = two_buckets(4);
  // Backward 6 ms, forward + optimizer 4 ms; bucket 0 is full 1.5 ms into backward (P).
  const double compute = 10e-3;
  const ComputeShares share = shares_of(0.6);
  auto predict = [&](const std::string& name) {
    const ModePlan m = mode_named(name);
    return predicted_step_s(m, modelled_mode_comm(m, plan, link, 4), compute, share);
  };
  // ddp: 10 + max(0, 1.5 + 6 - 4.5 - 6) + 4.5
  CHECK(predict("ddp") == Approx(14.5e-3));
  // none / after_backward, reduce: 10 + max(0, 1.5 + 3 - 2.25 - 6) + 2.25 + 3
  CHECK(predict("zero/none/reduce_broadcast") == Approx(15.25e-3));
  CHECK(predict("zero/after_backward/reduce_broadcast") == Approx(15.25e-3));
  // all-reduce then broadcast: 10 + max(0, 1.5 + 6 - 4.5 - 6) + 4.5 + 3
  CHECK(predict("zero/none/allreduce_broadcast") == Approx(17.5e-3));
  // interleaved, reduce: 4 + max(6, 1.5 + 6 - 4.5) + 4.5
  CHECK(predict("zero/interleaved/reduce_broadcast") == Approx(14.5e-3));

  // Communication-bound: compute 1 ms, bucket 0 full 0.15 ms into backward. ddp: 1 + max(0,
  // 0.15 + 6 - 4.5 - 0.6) + 4.5 = 6.55 ms.
  const ModePlan ddp = mode_named("ddp");
  CHECK(predicted_step_s(ddp, modelled_mode_comm(ddp, plan, link, 4), 1e-3, share) ==
        Approx(6.55e-3));
  // interleaved, all-reduce + broadcast (C = 9 ms, L = 6.75 ms): forward hides none of it, so
  // max(F, 0) + max(Bw, P + C - L) + L = 0.4 + 2.4 + 6.75 ms; the ideal bound max(X, C - L) + L
  // is 9 ms.
  const ModePlan il = mode_named("zero/interleaved/allreduce_broadcast");
  const ModeComm ilc = modelled_mode_comm(il, plan, link, 4);
  CHECK(predicted_step_s(il, ilc, 1e-3, share) == Approx(9.55e-3));
  CHECK(ideal_step_s(ilc, 1e-3) == Approx(9e-3));
}

TEST_CASE("backward's share of the FLOPs of an MLP", "[scaling]") {
  // widths 2-8-8: forward 2 (16 + 64) MACs per sample; backward 2 * 16 (no input gradient in the
  // first layer) + 4 * 64.
  const Model model(
      parse_config("[model]\nwidths = [2, 8, 8]\n[data]\nkind = \"spirals\"\n", "c.toml").model,
      DeviceKind::Cpu);
  CHECK(backward_flop_share(model.store()) == Approx(288.0 / 448.0));
  // One layer per bucket: bucket 0 holds the last layer (final first in backward), 256 of the
  // 288 backward MACs; bucket 1 the first layer, 32.
  const BucketPlan plan =
      build_bucket_plan(model.store(), 1e-6, 1e-6, 1, AssignmentPolicy::RoundRobin);
  REQUIRE(plan.buckets.size() == 2);
  const ComputeShares shares = compute_shares(model.store(), plan);
  CHECK(shares.backward == Approx(288.0 / 448.0));
  CHECK(shares.bucket_backward == std::vector<double>{256.0 / 288.0, 32.0 / 288.0});
}

TEST_CASE("a tier's pipeline starts when its first bucket is full", "[scaling]") {
  // ddp reduces in the last micro-batch only: with grad_accum 3 its all-reduces wait for two
  // whole backwards and bucket 0's part of the third. X = 4 ms (F 1.6, Bw 2.4), C = 6 ms, L =
  // 4.5 ms on one 1 GB/s ring of 4. grad_accum 1: P = 2.4 / 4 = 0.6, 4 + max(0, 0.6 + 1.5 -
  // 2.4) + 4.5; grad_accum 3: P = 2.4 (2 + 1/4) / 3 = 1.8, 4 + (1.8 + 1.5 - 2.4) + 4.5.
  const LinkConfig link{8.0, 0.0};
  const BucketPlan plan = two_buckets(4);
  for (const auto& [accum, step] : {std::pair{1, 8.5e-3}, std::pair{3, 9.4e-3}}) {
    const ModePlan ddp = mode_named("ddp", accum);
    const ModeComm c = modelled_mode_comm(ddp, plan, link, 4);
    CHECK(c.tier(LinkTier::Inter).first_reduced_micro_batch == accum - 1);
    CHECK(c.tier(LinkTier::Inter).first_reduced_bucket == 0);
    CHECK(predicted_step_s(ddp, c, 4e-3, shares_of(0.6)) == Approx(step));
  }
  // Stage 2 reduce-scatters every micro-batch: its pipeline starts in the first.
  const ModePlan zero2 = mode_named("zero2/interleaved/reduce_scatter_allgather", 3);
  CHECK(modelled_mode_comm(zero2, plan, link, 4).tier(LinkTier::Inter)
            .first_reduced_micro_batch == 0);
}

TEST_CASE("plan prints per-mode communication and the predicted scaling", "[scaling]") {
  std::filesystem::create_directories(ZEROLAP_TEST_TMP);
  const std::string path = std::string(ZEROLAP_TEST_TMP) + "/scaling_plan.toml";
  std::ofstream(path) << "[model]\nwidths = [2, 64, 64, 3]\n[data]\nkind = \"spirals\"\n";
  const test::CliResult r =
      test::run_zerolap("plan " + path + " --world 8 --link-gbps 10 --latency-us 5 --compute-ms 2");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("modelled communication per step at 8 ranks on a 10 Gb/s, "
                                       "5 us link"));
  CHECK_THAT(r.output, Catch::Contains("zero/interleaved/reduce_broadcast"));
  CHECK_THAT(r.output, Catch::Contains("512 ranks"));
  const test::CliResult bad = test::run_zerolap("plan " + path + " --compute-ms 2");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Contains("--link-gbps"));
}

TEST_CASE("each communicator's span: the shard group's and the replicas' tiers", "[scaling]") {
  // 4 ranks as 2 groups of 2: the group inside a node of 2, the replicas (ranks 0 and 2, 1 and
  // 3) across nodes; in nodes of 4 everything is inside; flat, the world spans the nodes.
  const ModePlan hybrid = at_ranks(any_mode_named("hsdp3/interleaved@2"), 4);
  CHECK(hybrid.replicas == 2);
  const CommSpans two = comm_spans(hybrid, two_tiers(2), 4);
  CHECK(two.place(CommRole::Reduce).members == 2);
  CHECK(two.place(CommRole::Reduce).stride == 1);
  CHECK(two.of(CommRole::Reduce).ranks == 2);
  CHECK(two.of(CommRole::Reduce).tier == LinkTier::Intra);
  CHECK(two.of(CommRole::Broadcast).tier == LinkTier::Intra);
  CHECK(two.place(CommRole::Replica).members == 2);
  CHECK(two.place(CommRole::Replica).stride == 2);
  CHECK(two.of(CommRole::Replica).ranks == 2);
  CHECK(two.of(CommRole::Replica).tier == LinkTier::Inter);
  const CommSpans four = comm_spans(hybrid, two_tiers(4), 4);
  CHECK(four.of(CommRole::Replica).tier == LinkTier::Intra);
  const ModePlan flat = at_ranks(any_mode_named("zero3/interleaved/reduce_scatter_allgather"), 4);
  const CommSpans f = comm_spans(flat, two_tiers(2), 4);
  CHECK(f.of(CommRole::Reduce).ranks == 4);
  CHECK(f.of(CommRole::Reduce).tier == LinkTier::Inter);
  CHECK(f.place(CommRole::Reduce).members == 4);
  // A group of 3 does not tile 4 ranks.
  CHECK_FALSE(fits_ranks(any_mode_named("hsdp1/none@3"), 4));
  CHECK(fits_ranks(any_mode_named("hsdp1/none@3"), 6));
}

TEST_CASE("the tiered model: each tier's collectives, bytes and step by hand", "[scaling]") {
  // Buckets of 1 MB and 3 MB laid out for a group of 2; 4 ranks in 2 nodes of 2: the group's
  // collectives inside a node at 4 GB/s (ring of 2: (p-1)/p = 1/2), the replicas' all-reduce of
  // each half-bucket shard across nodes at 1 GB/s (2 (p-1)/p = 1).
  const LinkConfig link = two_tiers(2);
  const BucketPlan group_plan = two_buckets(2);
  const ModeComm h =
      modelled_mode_comm(any_mode_named("hsdp3/interleaved@2"), group_plan, link, 4);
  const TierComm& intra = h.tier(LinkTier::Intra);
  const TierComm& inter = h.tier(LinkTier::Inter);
  // Intra: reduce-scatters 0.125 + 0.375 ms; gathers: forward 0.375 + 0.125, backward 0.375
  // (bucket 0 stays resident); the last bucket's: 0.375 x 3.
  CHECK(intra.reduce_s == Approx(0.5e-3));
  CHECK(intra.reduce_last_s == Approx(0.375e-3));
  CHECK(intra.broadcast_s == Approx(0.875e-3));
  CHECK(intra.total_s == Approx(1.375e-3));
  CHECK(intra.last_s == Approx(1.125e-3));
  CHECK(intra.wire_bytes == 500'000 + 1'500'000 + 1'500'000 + 500'000 + 1'500'000);
  // Inter: all-reduces of 0.5 MB and 1.5 MB shards: 0.5 + 1.5 ms; 2 (R-1)/R x M/G = 2 MB.
  CHECK(inter.reduce_s == Approx(2e-3));
  CHECK(inter.reduce_last_s == Approx(1.5e-3));
  CHECK(inter.broadcast_s == 0.0);
  CHECK(inter.wire_bytes == 2 * 1 * 4'000'000 / 2 / 2);
  CHECK(h.total_s == Approx(3.375e-3));
  CHECK(h.last_s == Approx(2.625e-3));
  CHECK(h.wire_bytes == intra.wire_bytes + inter.wire_bytes);

  // Forward's gathers but the last bucket's: FW = 0.125 ms, inside a node.
  CHECK(intra.forward_s == Approx(0.125e-3));
  CHECK(inter.forward_s == 0.0);

  // Both tiers' pipelines start at bucket 0; the replicas' all-reduce of it waits for its
  // reduce-scatter in the group too (0.125 ms).
  CHECK(intra.first_reduced_bucket == 0);
  CHECK(intra.lead_s == 0.0);
  CHECK(inter.first_reduced_bucket == 0);
  CHECK(inter.lead_s == Approx(0.125e-3));

  // L = 1.125 + 1.5 = 2.625 ms. Interleaved: max(F, FW) + max(Bw, EB) + L with EB_t = P_t + C_t
  // - FW_t - L_t (no gathers in backward but the last bucket's), P_t = Bw / 4 + lead_t. X = 10
  // ms (F 4, Bw 6): EB = max(1.5 + 0.125, 1.625 + 0.5) < Bw: 4 + 6 + 2.625. X = 0.2 ms (F 0.08,
  // Bw 0.12, P_t 0.03 and 0.155): max(0.08, 0.125) + max(0.12, 0.155, 0.655) + 2.625. The ideal:
  // max(X, max_t (C_t - L_t)) + L = 0.5 + 2.625.
  const ComputeShares share = shares_of(0.6);
  const ModePlan il = any_mode_named("hsdp3/interleaved@2");
  CHECK(predicted_step_s(il, h, 10e-3, share) == Approx(12.625e-3));
  CHECK(predicted_step_s(il, h, 0.2e-3, share) == Approx(0.125e-3 + 0.655e-3 + 2.625e-3));
  CHECK(ideal_step_s(h, 0.2e-3) == Approx(3.125e-3));
  // none: X + max(0, ER - Bw) + RL + Bc, ER_t = P_t + R_t - RL_t: max(1.5 + 0.125, 1.625 +
  // 0.5) at X = 10 ms, max(0.155, 0.655) at 0.2 ms; RL = 1.875, Bc = 0.875: 10 + 0 + 1.875 +
  // 0.875, and 0.2 + (0.655 - 0.12) + 2.75.
  const ModePlan none = any_mode_named("hsdp3/none@2");
  const ModeComm hn = modelled_mode_comm(none, group_plan, link, 4);
  CHECK(predicted_step_s(none, hn, 10e-3, share) == Approx(12.75e-3));
  CHECK(predicted_step_s(none, hn, 0.2e-3, share) == Approx(0.2e-3 + 0.535e-3 + 2.75e-3));

  // Flat stage 3 on the same 4 ranks: one ring across the nodes at 1 GB/s, (p-1)/p = 3/4 of
  // each bucket per collective: reduce-scatters 0.75 + 2.25 ms, gathers 2.25 + 0.75 + 2.25 ms.
  const ModeComm f = modelled_mode_comm(
      any_mode_named("zero3/interleaved/reduce_scatter_allgather"), two_buckets(4), link, 4);
  CHECK(f.tier(LinkTier::Intra).total_s == 0.0);
  CHECK(f.tier(LinkTier::Inter).total_s == Approx(8.25e-3));
  CHECK(f.last_s == Approx(6.75e-3));
  CHECK(f.wire_bytes == 750'000 + 2'250'000 + 2'250'000 + 750'000 + 2'250'000);
  // Bytes across nodes per rank: hybrid 2 MB against flat 8.25 MB (3 (W-1)/W x 4 MB = 9 MB less
  // bucket 0's backward gather, resident from forward).
  CHECK(f.tier(LinkTier::Inter).wire_bytes == 8'250'000);
  // FW = bucket 0's forward gather, 0.75 ms; EB = P + 8.25 - 0.75 - 6.75 = P + 0.75 ms.
  const ModePlan flat_il = any_mode_named("zero3/interleaved/reduce_scatter_allgather");
  CHECK(f.tier(LinkTier::Inter).forward_s == Approx(0.75e-3));
  CHECK(predicted_step_s(flat_il, f, 10e-3, share) == Approx(4e-3 + 6e-3 + 6.75e-3));
  CHECK(predicted_step_s(flat_il, f, 0.2e-3, share) == Approx(0.75e-3 + 0.78e-3 + 6.75e-3));
}

TEST_CASE("with one tier the tiers share a link: the hybrid step sums them", "[scaling]") {
  // No node_ranks: the group's and the replicas' collectives all queue on the rank's one link
  // (Note [Link occupancy]), so E = C - L as for a flat ring. At 1 GB/s: reduce-scatters 0.5 +
  // 1.5, gathers 1.5 + 0.5 + 1.5, all-reduces 0.5 + 1.5 ms; the last bucket's 1.5 x 4; forward's
  // gather of bucket 0, 0.5. X = 1 ms (P = 0.15): max(0.4, 0.5) + max(0.6, 0.15 + 7.5 - 0.5 -
  // 6) + 6; X = 10 ms: 4 + 6 + 6.
  const LinkConfig link{8.0, 0.0};
  const ModePlan il = any_mode_named("hsdp3/interleaved@2");
  const ModeComm h = modelled_mode_comm(il, two_buckets(2), link, 4);
  CHECK(h.tier(LinkTier::Intra).total_s == 0.0);
  CHECK(h.total_s == Approx(7.5e-3));
  CHECK(h.last_s == Approx(6e-3));
  CHECK(predicted_step_s(il, h, 1e-3, shares_of(0.6)) == Approx(1.65e-3 + 6e-3));
  CHECK(predicted_step_s(il, h, 10e-3, shares_of(0.6)) == Approx(16e-3));
}

TEST_CASE("the modes plan models: hybrid rows for a node or parallel.shard_group", "[scaling]") {
  const std::string base = "[model]\nwidths = [2, 8, 3]\n[data]\nkind = \"spirals\"\n";
  const auto hybrid_groups = [](const Config& c) {
    std::set<int> groups;
    for (const ModePlan& m : all_mode_plans(c)) {
      if (m.mode.shard_group > 0) groups.insert(m.mode.shard_group);
    }
    return groups;
  };
  const Config flat = parse_config(base, "c.toml", {"link.bandwidth_gbps=100"});
  CHECK(all_mode_plans(flat).size() == all_modes().size());
  CHECK(hybrid_groups(flat).empty());
  const Config nodes = parse_config(
      base, "c.toml", {"link.bandwidth_gbps=100", "link.intra_gbps=900", "link.node_ranks=8"});
  CHECK(all_mode_plans(nodes).size() == all_modes().size() + 9);  // stages 1-3 x 3 overlaps
  CHECK(hybrid_groups(nodes) == std::set<int>{8});
  const Config chosen = parse_config(
      base, "c.toml",
      {"link.bandwidth_gbps=100", "link.intra_gbps=900", "link.node_ranks=8",
       "parallel.mode=\"zero\"", "parallel.collective=\"reduce_scatter_allgather\"",
       "parallel.shard_group=4"});
  CHECK(hybrid_groups(chosen) == std::set<int>{4});
  CHECK(at_ranks(all_mode_plans(chosen).back(), 512).replicas == 128);
}

TEST_CASE("plan --node-ranks --intra-gbps: each tier's bytes and time, and hybrid rows",
          "[scaling]") {
  std::filesystem::create_directories(ZEROLAP_TEST_TMP);
  const std::string path = std::string(ZEROLAP_TEST_TMP) + "/scaling_plan_tiers.toml";
  std::ofstream(path) << "[model]\nwidths = [2, 64, 64, 3]\n[data]\nkind = \"spirals\"\n";
  const std::string tiers = " --link-gbps 400 --node-ranks 4 --intra-gbps 3600";
  const test::CliResult r =
      test::run_zerolap("plan " + path + " --world 8" + tiers + " --compute-ms 2");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("nodes of 4 ranks, 400 Gb/s per rank between them") &&
                           Catch::Contains("3600 Gb/s inside") &&
                           Catch::Contains("inter MB") && Catch::Contains("intra MB") &&
                           Catch::Contains("hsdp3/interleaved@4 (2 replicas)") &&
                           Catch::Contains("hsdp1/none@4 (2 replicas)") &&
                           Catch::Contains("512 ranks"));
  // Every line of the modelled tables fits 100 columns.
  const std::size_t tables = r.output.find("modelled communication per step");
  REQUIRE(tables != std::string::npos);
  std::istringstream lines(r.output.substr(tables));
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    CHECK(line.size() <= 100);
  }
  // Without a compute time: the floor the links set, at 8, 64 and 512 ranks.
  const test::CliResult floor = test::run_zerolap("plan " + path + " --world 8" + tiers);
  CHECK(floor.exit_code == 0);
  CHECK_THAT(floor.output, Catch::Contains("the step's floor") &&
                               Catch::Contains("hsdp3/interleaved@4 "));
  // Another shard group.
  const std::string hybrid = " --set parallel.mode=zero --set "
                             "parallel.collective=reduce_scatter_allgather";
  const test::CliResult two = test::run_zerolap(
      "plan " + path + " --world 8" + tiers + hybrid + " --set parallel.shard_group=2");
  CHECK(two.exit_code == 0);
  CHECK_THAT(two.output, Catch::Contains("hsdp3/interleaved@2 (4 replicas)") &&
                             !Catch::Contains("@4"));
  // A shard group or a node that does not tile the planned ranks: exit 2 naming the numbers.
  const test::CliResult bad_group = test::run_zerolap(
      "plan " + path + " --world 8" + tiers + hybrid + " --set parallel.shard_group=3");
  CHECK(bad_group.exit_code == 2);
  CHECK_THAT(bad_group.output, Catch::Contains("parallel.shard_group = 3") &&
                                   Catch::Contains("8 ranks"));
  const test::CliResult bad_node = test::run_zerolap("plan " + path + " --world 6" + tiers);
  CHECK(bad_node.exit_code == 2);
  CHECK_THAT(bad_node.output, Catch::Contains("link.node_ranks = 4") && Catch::Contains("6"));
  // The flags have their keys' checks: an intra bandwidth below the inter one.
  const test::CliResult slow = test::run_zerolap(
      "plan " + path + " --world 8 --link-gbps 400 --node-ranks 4 --intra-gbps 100");
  CHECK(slow.exit_code == 2);
  CHECK_THAT(slow.output, Catch::Contains("link.intra_gbps"));
}

TEST_CASE("bench refuses a hybrid mode whose group does not divide the world, before measuring",
          "[scaling]") {
  std::filesystem::create_directories(ZEROLAP_TEST_TMP);
  const std::string path = std::string(ZEROLAP_TEST_TMP) + "/bench_bad_group.toml";
  std::ofstream(path) << "[model]\nwidths = [2, 64, 64, 3]\n[data]\nkind = \"spirals\"\n"
                         "[bench]\nmodes = [\"ddp\", \"hsdp3/interleaved@2\"]\n[output]\ndir = \""
                      << ZEROLAP_TEST_TMP << "/bench_bad_group\"\n";
  const test::CliResult r = test::run_zerolap("bench " + path);  // one rank
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("bench_bad_group.toml:6: bench.modes: ") &&
                           Catch::Contains("hsdp3/interleaved@2") &&
                           Catch::Contains("groups of 2") && Catch::Contains("the 1 rank") &&
                           !Catch::Contains("measuring limits"));
}
