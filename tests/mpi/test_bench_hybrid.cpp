// The bench's hybrid rows on 4 ranks as 2 modelled nodes of 2 (hsdp<stage>/<overlap>@2 beside
// flat stage 3): the bytes each tier's communicators measured per step are the scaling model's
// (the plan's) for that tier, the per-tier figures reach the JSON and the table, and a shard group
// that does not divide the world is refused before anything is measured. Assertions are on bytes
// and on what the model accounts for, never on how fast anything ran.
#include <mpi.h>

#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/bench/bench.h"
#include "runtime/bench/bench_report.h"
#include "runtime/bench/scaling_model.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/train/plan/collective_program.h"
#include "runtime/train/plan/shard_layout.h"
#include "tests/mpi/mpi_test_util.h"

using namespace zl;

namespace {

// 2 nodes of 2 ranks, fast enough that the modelled delays stay below a millisecond per step.
const std::vector<std::string> kTwoNodes{"link.bandwidth_gbps=100", "link.intra_gbps=400",
                                         "link.node_ranks=2"};

}  // namespace

TEST_CASE("hybrid bench rows: each tier's measured bytes are the plan's", "[bench-hybrid]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 4);
  const std::string dir = test::shared_dir(MPI_COMM_WORLD, "bench_hybrid");
  const std::vector<std::string> modes{"zero3/interleaved/reduce_scatter_allgather",
                                       "hsdp3/interleaved@2", "hsdp1/none@2"};
  const Config config = test::small_config(test::with(
      kTwoNodes, {"bench.warmup=1", "bench.steps=2", "bench.bucket_cap_mb=[0.004]",
                  "parallel.first_bucket_cap_mb=0.001",
                  fmt::format("bench.modes=[\"{}\"]", fmt::join(modes, "\", \"")),
                  "output.dir=\"" + dir + "\""}));
  BenchOptions options;
  options.progress = false;
  const BenchReport report = run_bench(config, world, options);
  REQUIRE(report.rows.size() == modes.size());

  const std::vector<Mode> bench = bench_modes(config);
  for (std::size_t i = 0; i < bench.size(); ++i) {
    const BenchRow& row = report.rows[i];
    INFO(row.mode);
    CHECK(row.mode == modes[i]);  // named from Mode::name()
    // The plan's figures: the mode at this world on its layout (a group's for hybrid rows).
    const ModePlan mode = bench_mode_plan(bench[i], config, config.precision, world.size);
    const BucketPlan plan =
        plan_layout(config.model, config.parallel, mode,
                    planned_ranks(config, mode, world.size), 0.004)
            .plan;
    REQUIRE(plan.buckets.size() > 1);
    const ModeComm modelled = modelled_mode_comm(mode, plan, config.link, world.size);
    const TierComm& inter = modelled.tier(LinkTier::Inter);
    const TierComm& intra = modelled.tier(LinkTier::Intra);
    const BenchRow::TierFigures& got_inter = row.tiers[0];
    const BenchRow::TierFigures& got_intra = row.tiers[1];
    CHECK(got_inter.wire_bytes_per_step + got_intra.wire_bytes_per_step ==
          row.wire_bytes_per_step);
    if (bench[i].shard_group == 0) {
      // Flat: one ring of 4 across both nodes, plus the step verdict's all-reduce of 2 x world
      // doubles on the same communicator.
      CHECK(intra.wire_bytes == 0);
      CHECK(got_intra.wire_bytes_per_step == 0);
      CHECK(got_inter.wire_bytes_per_step ==
            inter.wire_bytes + wire_bytes(CollectiveOp::AllReduce, 2 * world.size * 8, 4));
      CHECK(got_intra.comm_model_s == 0.0);
    } else {
      // Hybrid: the group's collectives inside a node, the replicas' all-reduce across nodes;
      // the verdict runs on comm.world, outside the step's communicators.
      CHECK(got_inter.wire_bytes_per_step == inter.wire_bytes);
      CHECK(got_intra.wire_bytes_per_step == intra.wire_bytes);
      CHECK(intra.wire_bytes > 0);
      // Across nodes only the replicas' all-reduce: 2 (R-1)/R x M/G, M the padded gradients.
      std::int64_t m = 0;
      for (const Bucket& b : plan.buckets) m += b.bytes();
      CHECK(inter.wire_bytes == 2 * (2 - 1) * m / 2 / 2);
      CHECK(got_intra.comm_model_s > 0.0);
    }
    CHECK(got_inter.comm_model_s > 0.0);
    CHECK(row.comm_model_s == Approx(got_inter.comm_model_s + got_intra.comm_model_s));
    for (const BenchRow::TierFigures& t : row.tiers) {
      CHECK(t.exposed_comm_s >= 0.0);
      CHECK(t.exposed_comm_s <= t.comm_s + 1e-9);
      CHECK(t.hidden_comm_s <= t.comm_s + 1e-9);
    }
    CHECK(row.predicted_step_s >= row.ideal_step_s * (1.0 - 1e-12));
    CHECK(row.state_bytes == row.planned_state_bytes);
  }
  if (world.is_root()) {
    const nlohmann::ordered_json j = bench_to_json(report);
    const auto& first = j.at("results").at(1);
    for (const char* field : {"inter_comm_model_s", "inter_exposed_comm_s", "inter_hidden_comm_s",
                              "inter_wire_bytes_per_step", "intra_comm_model_s",
                              "intra_exposed_comm_s", "intra_wire_bytes_per_step"}) {
      INFO(field);
      CHECK(first.contains(field));
    }
    CHECK_THAT(bench_to_csv(report), Catch::Contains("intra_wire_bytes_per_step"));
    // The limits timed each communicator the rows use: the world, a node (a group of 2), the
    // replicas (2 ranks, 2 apart).
    bool replicas = false;
    for (const auto& c : j.at("limits").at("collectives")) {
      replicas = replicas || (c.at("members") == 2 && c.at("stride") == 2);
    }
    CHECK(replicas);
    const std::string table = format_bench_table(report);
    CHECK_THAT(table, Catch::Contains("per tier of the link") && Catch::Contains("inter MB"));
    std::istringstream lines(table);
    for (std::string line; std::getline(lines, line);) {
      INFO(line);
      CHECK(line.size() <= kNarrowTableColumns);
    }
  }
}

// (That `zerolap bench` refuses it before it prints "measuring limits": test_scaling_model.cpp.)
TEST_CASE("a hybrid bench row whose group does not divide the world is refused",
          "[bench-hybrid]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const Config config = test::small_config(
      {"bench.warmup=1", "bench.steps=1",
       "bench.modes=[\"ddp\", \"hsdp2/after_backward@3\"]"});
  BenchOptions options;
  options.progress = false;
  REQUIRE_THROWS_AS(run_bench(config, world, options), UserError);
  REQUIRE_THROWS_WITH(run_bench(config, world, options),
                      Catch::Contains("hsdp2/after_backward@3") && Catch::Contains("groups of 3") &&
                          Catch::Contains("4 ranks"));
}
