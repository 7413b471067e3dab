// The scaling model of `zerolap plan --compute-ms` (runtime/bench/scaling_model.h) and the link
// model with link.ranks (runtime/comm/link/simulated_link.h), against hand computations.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "models/model.h"
#include "runtime/bench/scaling_model.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/config/config.h"
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
  const double compute = 10e-3, share = 0.6;  // backward 6 ms, forward + optimizer 4 ms
  auto predict = [&](const std::string& name) {
    const ModePlan m = mode_named(name);
    return predicted_step_s(m, modelled_mode_comm(m, plan, link, 4), compute, share);
  };
  // ddp: 10 + max(0, 6 - 4.5 - 6) + 4.5
  CHECK(predict("ddp") == Approx(14.5e-3));
  // none / after_backward, reduce: 10 + max(0, 3 - 2.25 - 6) + 2.25 + 3
  CHECK(predict("zero/none/reduce_broadcast") == Approx(15.25e-3));
  CHECK(predict("zero/after_backward/reduce_broadcast") == Approx(15.25e-3));
  // all-reduce then broadcast: 10 + max(0, 6 - 4.5 - 6) + 4.5 + 3
  CHECK(predict("zero/none/allreduce_broadcast") == Approx(17.5e-3));
  // interleaved, reduce: max(10, 6 - 4.5) + 4.5
  CHECK(predict("zero/interleaved/reduce_broadcast") == Approx(14.5e-3));

  // Communication-bound: compute 1 ms. ddp: 1 + max(0, 6 - 4.5 - 0.6) + 4.5 = 6.4 ms.
  const ModePlan ddp = mode_named("ddp");
  CHECK(predicted_step_s(ddp, modelled_mode_comm(ddp, plan, link, 4), 1e-3, share) ==
        Approx(6.4e-3));
  // interleaved: max(1, 9 - 4.5) + 4.5 for all-reduce + broadcast (C = 9 ms, C_last = 6.75 ms):
  // max(1, 2.25) + 6.75 = 9 ms.
  const ModePlan il = mode_named("zero/interleaved/allreduce_broadcast");
  CHECK(predicted_step_s(il, modelled_mode_comm(il, plan, link, 4), 1e-3, share) == Approx(9e-3));
}

TEST_CASE("backward's share of the FLOPs of an MLP", "[scaling]") {
  // widths 2-8-8: forward 2 (16 + 64) MACs per sample; backward 2 * 16 (no input gradient in the
  // first layer) + 4 * 64.
  const Model model(
      parse_config("[model]\nwidths = [2, 8, 8]\n[data]\nkind = \"spirals\"\n", "c.toml").model,
      DeviceKind::Cpu);
  CHECK(backward_flop_share(model.store()) == Approx(288.0 / 448.0));
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
