// MPI tests of `zerolap bench` (every mode on a tiny model; JSON/CSV fields; optimizer state vs
// the plan), the simulated link (collectives take at least the modelled time; training results
// bitwise unchanged) and the Chrome trace (valid, one process per rank, interleaved overlap
// visible). Timing assertions are lower bounds only, so they hold on a loaded machine.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "runtime/bench/bench.h"
#include "runtime/bench/bench_report.h"
#include "runtime/bench/timing_collectives.h"
#include "runtime/comm/backends/mpi_communicator.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/plan/shard_layout.h"
#include "runtime/trace/trace_writer.h"
#include "tests/mpi/mpi_test_util.h"

using namespace zl;

namespace {

using Clock = std::chrono::steady_clock;

// A fresh directory under the test tmp dir, made by rank 0, visible to all ranks on return.
std::string fresh_dir(const std::string& name) {
  const std::string dir = std::string(ZEROLAP_TEST_TMP) + "/" + name;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

const std::vector<std::string> kRowFields = {
    "precision", "reduce_dtype", "master_weights", "mode", "bucket_cap_mb", "buckets", "samples_per_step", "step_s", "step_median_s",
    "step_p10_s", "step_p90_s", "samples_per_s", "speedup_vs_ddp", "forward_s", "backward_s",
    "finish_backward_s", "optimizer_s", "comm_busy_s", "compute_s", "compute_forward_s",
    "compute_backward_s", "compute_optimizer_s", "exposed_comm_s", "comm_model_s", "wait_s",
    "reduction_s", "broadcast_s", "comm_s", "hidden_comm_s", "idle_s", "comm_overhead_s",
    "phases_vs_step",
    "nonoverlap_comm_s", "ideal_step_s", "predicted_step_s", "vs_ideal", "wire_bytes_per_step",
    "payload_bytes_per_step", "state_bytes_max", "planned_state_bytes_max",
    "optimizer_state_bytes_max", "planned_optimizer_state_bytes_max", "peak_rss_bytes_max"};

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, sep)) out.push_back(cell);
  if (!line.empty() && line.back() == sep) out.push_back("");
  return out;
}

}  // namespace

TEST_CASE("bench runs every mode and writes JSON and CSV with every field", "[bench]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const std::string dir = fresh_dir("bench_all_modes");
  const Config config = test::small_config(
      {"bench.warmup=1", "bench.steps=3", "bench.bucket_cap_mb=[0.002, 1.0]",
       "parallel.first_bucket_cap_mb=0.001", "output.dir=\"" + dir + "\""});
  BenchOptions options;
  options.progress = false;
  const BenchReport report = run_bench(config, world, options);

  REQUIRE(report.rows.size() == all_modes().size() * 2);
  for (const BenchRow& row : report.rows) {
    INFO(row.mode << " @ " << row.bucket_cap_mb);
    CHECK(row.step_s > 0.0);
    CHECK(row.compute_s > 0.0);
    CHECK(row.step_times_s.size() == 3);
    CHECK(row.step_p10_s <= row.step_median_s);
    CHECK(row.step_median_s <= row.step_p90_s);
    CHECK(row.ideal_step_s > 0.0);
    // The scaling model's step for the mode's schedule is never below the bound any schedule
    // has (Note [Scaling model]).
    CHECK(row.predicted_step_s >= row.ideal_step_s * (1.0 - 1e-12));
    REQUIRE(row.speedup_vs_ddp.has_value());
    // What each rank allocated (its optimizer state; parameters + gradients + master + optimizer
    // state) is what `zerolap plan` reports for it.
    REQUIRE(row.optimizer_state_bytes.size() == static_cast<std::size_t>(world.size));
    CHECK(row.optimizer_state_bytes == row.planned_optimizer_state_bytes);
    REQUIRE(row.state_bytes.size() == static_cast<std::size_t>(world.size));
    CHECK(row.state_bytes == row.planned_state_bytes);
    CHECK(row.precision == "fp32");
    CHECK(row.peak_rss_bytes.size() == static_cast<std::size_t>(world.size));
    if (world.size > 1) CHECK(row.wire_bytes_per_step > 0);
  }
  for (const BenchRow& row : report.rows) {
    // The timeline's figures (Note [Exposed communication]) are lengths of sets of time; per
    // rank exposed + hidden = comm, and each figure is the maximum over ranks.
    INFO(row.mode << " @ " << row.bucket_cap_mb);
    CHECK(row.exposed_comm_s >= 0.0);
    CHECK(row.hidden_comm_s >= 0.0);
    CHECK(row.exposed_comm_s <= row.comm_s + 1e-9);
    CHECK(row.hidden_comm_s <= row.comm_s + 1e-9);
    CHECK(row.exposed_comm_s + row.hidden_comm_s >= row.comm_s - 1e-9);
    CHECK(row.forward_s > 0.0);
    CHECK(row.backward_s > 0.0);
    CHECK(row.bucket_reduction_s.size() == static_cast<std::size_t>(row.buckets));
  }
  CHECK(report.rows[1].bucket_cap_mb == 0.002);
  CHECK(report.rows[1].buckets > 1);

  if (world.is_root()) {
    write_bench_outputs(report, dir);
    std::ifstream json_file(dir + "/bench.json");
    const auto json = nlohmann::json::parse(json_file);
    CHECK(json.at("world_size") == world.size);
    CHECK(json.at("simulated_link").is_null());
    CHECK(json.at("comm_priority") == "normal");  // the test's config leaves the default
    // runtime.threads as resolved for this rank (the test's config leaves "auto"), and the header
    // says it.
    CHECK(json.at("cpu_threads") == world.cpus_per_rank);
    CHECK_THAT(format_bench_table(report),
               Catch::Contains(fmt::format("{} GEMM thread{} per rank", world.cpus_per_rank,
                                           world.cpus_per_rank == 1 ? "" : "s")));
    BenchReport threaded = report;
    threaded.cpu_threads = 3;
    CHECK_THAT(format_bench_table(threaded), Catch::Contains("3 GEMM threads per rank, comm threads"));
    CHECK(bench_to_json(threaded).at("cpu_threads") == 3);
    threaded.device = DeviceKind::Cuda;  // GPU runs' GEMMs are cuBLAS's: no CPU thread count
    CHECK_THAT(format_bench_table(threaded), !Catch::Contains("GEMM thread"));
    CHECK(json.at("limits").at("triad_gbps").get<double>() > 0.0);
    REQUIRE(json.at("limits").at("precisions").size() == 1);
    const auto& fp32 = json.at("limits").at("precisions").at(0);
    CHECK(fp32.at("precision") == "fp32");
    for (const char* key : {"gemm_step_s", "optimizer_gbps", "optimizer_vs_triad"}) {
      CHECK(fp32.at(key).get<double>() > 0.0);
    }
    CHECK(fp32.at("optimizer_bytes_per_element") == 28);  // Adam: p, g, m, v read; p, m, v written
    CHECK(!fp32.at("gemm").empty());
    if (world.size > 1) CHECK(!json.at("limits").at("collectives").empty());
    REQUIRE(json.at("results").size() == report.rows.size());
    for (const auto& row : json.at("results")) {
      for (const auto& field : kRowFields) CHECK(row.contains(field));
      for (const char* vec : {"state_bytes", "planned_state_bytes", "optimizer_state_bytes",
                              "planned_optimizer_state_bytes", "peak_rss_bytes",
                              "step_times_s", "bucket_reduction_s", "bucket_step_s",
                              "bucket_broadcast_s"}) {
        CHECK(row.at(vec).is_array());
      }
    }

    std::ifstream csv_file(dir + "/bench.csv");
    std::string line;
    REQUIRE(std::getline(csv_file, line));
    const auto header = split(line, ',');
    for (const auto& field : kRowFields) {
      CHECK(std::find(header.begin(), header.end(), field) != header.end());
    }
    std::size_t rows = 0;
    while (std::getline(csv_file, line)) {
      CHECK(split(line, ',').size() == header.size());
      ++rows;
    }
    CHECK(rows == report.rows.size());
  }
}

TEST_CASE("bench.rounds runs the whole list once per round and pools each row's rounds",
          "[bench]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  Config config = test::small_config(
      {"bench.warmup=1", "bench.steps=3", "bench.rounds=2",
       "bench.modes=[\"ddp\", \"zero/interleaved/reduce_scatter_allgather\"]",
       "output.dir=\"" + fresh_dir("bench_rounds") + "\""});
  BenchOptions options;
  options.progress = false;
  SECTION("every round") {
    const BenchReport report = run_bench(config, world, options);
    CHECK(report.rounds == 2);
    CHECK(report.planned_runs == 4);
    CHECK(report.finished_runs == 4);
    REQUIRE(report.rows.size() == 2);
    for (const BenchRow& row : report.rows) {
      INFO(row.mode);
      CHECK(row.step_times_s.size() == 6);  // steps x rounds
      CHECK(row.step_s > 0.0);
      CHECK(row.compute_s > 0.0);
      CHECK(row.step_p10_s <= row.step_median_s);
      CHECK(row.step_median_s <= row.step_p90_s);
      CHECK(row.state_bytes == row.planned_state_bytes);
      if (world.size > 1) CHECK(row.wire_bytes_per_step > 0);
    }
    CHECK(bench_to_json(report).at("rounds") == 2);
    CHECK_THAT(format_bench_table(report),
               Catch::Contains("3 timed steps after 1 warmup, x 2 rounds"));
  }
  SECTION("stopped: the rows pool the same rounds, round-robin") {
    // After 1 run: the first row of round 1. After 2: one round of each row (not two rounds of
    // the first). After 3: round 2 was cut short, so only round 1 counts, for every row.
    for (const int stop_after : {1, 2, 3}) {
      INFO("stop after run " << stop_after);
      int runs = 0;
      options.stop_after_run = [&] { return ++runs == stop_after ? SIGINT : 0; };
      const BenchReport report = run_bench(config, world, options);
      CHECK(report.stopped_by == SIGINT);
      CHECK(report.finished_runs == static_cast<std::size_t>(stop_after));
      CHECK(report.rounds == 1);
      REQUIRE(report.rows.size() == (stop_after == 1 ? 1u : 2u));
      CHECK(report.rows[0].mode == "ddp");
      for (const BenchRow& row : report.rows) CHECK(row.step_times_s.size() == 3);
    }
  }
  SECTION("a signal during the last run: nothing is left to stop, the bench is complete") {
    int asked = 0;
    options.stop_after_run = [&] { return ++asked == 4 ? SIGINT : 0; };
    const BenchReport report = run_bench(config, world, options);
    CHECK(asked == 3);  // not after the last run
    CHECK(report.stopped_by == 0);
    CHECK(report.finished_runs == 4);
    REQUIRE(report.rows.size() == 2);
    CHECK(report.rows[1].step_times_s.size() == 6);
  }
}

TEST_CASE("bench.modes rejects a misspelt mode and names the accepted ones", "[bench]") {
  const std::vector<std::string> misspelt{"bench.modes=[\"ddp\", \"zero/interleaved/allreduce\"]"};
  REQUIRE_THROWS_AS(test::small_config(misspelt), UserError);
  REQUIRE_THROWS_WITH(test::small_config(misspelt),
                      Catch::Contains("bench.modes") && Catch::Contains("zero/none/reduce_broadcast"));
  Config config = test::small_config({});
  config.bench.modes = {"zero/after_backward/reduce_broadcast", "ddp"};
  const auto modes = bench_modes(config);
  REQUIRE(modes.size() == 2);
  CHECK(modes[0].overlap == Overlap::AfterBackward);
  CHECK(modes[0].collective == CollectiveKind::ReduceBroadcast);
  CHECK(modes[1].ddp());
}

TEST_CASE("a timed run's barrier a peer never joins times out naming the bench", "[bench]") {
  const World world = describe_world();
  REQUIRE(world.size >= 2);
  // Its own communicator: rank 0's abandoned barrier must not match a later one on the world's.
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(world.comm, &comm);
  World bench_world = world;
  bench_world.comm = comm;
  if (world.rank == 0) {
    // The modes' runs and the limits' micro-benchmarks share this barrier and its message.
    CHECK_THROWS_WITH(aligned_barrier(bench_world, WaitLimit{0, 0.5}),
                      Catch::Contains("rank 0: the bench's barrier did not complete within "
                                      "runtime.timeout_s = 0.5 s"));
  }
  MPI_Barrier(world.comm);
  // The other ranks join late (nonblocking, as a nonblocking collective matches only its kind),
  // so rank 0's abandoned barrier completes (progressed by rank 0's barrier below) and MPI shuts
  // down cleanly.
  if (world.rank != 0) timed_barrier(comm, WaitLimit{world.rank, 60}, "the late barrier");
  MPI_Barrier(world.comm);
  MPI_Comm_free(&comm);
}

TEST_CASE("stage 2 and 3 rows move every micro-batch's collectives: the measured bytes are the "
          "plan's",
          "[bench]") {
  // The same rows at grad_accum 1 and 3: each rank's measured payload per step is what
  // ModePlan::collectives lists (stages 2 and 3 reduce-scatter, and stage 3 gathers, in every
  // micro-batch; stage 1 reduces once per step), plus the step verdict's all-reduce. The
  // grad_accum 3 bench runs two rounds: the pooled figures are still per step.
  const World world = test::world_of(MPI_COMM_WORLD);
  const std::vector<std::string> modes{"zero/none/reduce_scatter_allgather",
                                       "zero2/after_backward/reduce_scatter_allgather",
                                       "zero3/interleaved/reduce_scatter_allgather"};
  std::map<std::int64_t, std::vector<std::int64_t>> measured, planned;
  for (const std::int64_t grad_accum : {1, 3}) {
    const std::string dir = fresh_dir(fmt::format("bench_micro_batches_{}", grad_accum));
    const Config config = test::small_config(
        {"bench.warmup=1", "bench.steps=2", "bench.bucket_cap_mb=[0.004]",
         "parallel.first_bucket_cap_mb=0.001", "data.train_samples=192",
         fmt::format("train.grad_accum={}", grad_accum),
         fmt::format("bench.rounds={}", grad_accum == 3 ? 2 : 1),
         fmt::format("bench.modes=[\"{}\"]", fmt::join(modes, "\", \"")),
         "output.dir=\"" + dir + "\""});
    BenchOptions options;
    options.progress = false;
    const BenchReport report = run_bench(config, world, options);
    REQUIRE(report.rows.size() == modes.size());
    for (const Mode& m : bench_modes(config)) {
      const ModePlan mode = bench_mode_plan(m, config, config.precision, world.size);
      CHECK(mode.micro_batches == grad_accum);
      const BucketPlan plan =
          plan_layout(config.model, config.parallel, mode, world.size, 0.004).plan;
      REQUIRE(plan.buckets.size() > 1);
      std::int64_t bytes = 0;
      for (const ProgramEntry& c : collective_program(mode, plan)) bytes += c.bytes();
      planned[grad_accum].push_back(bytes);
    }
    for (const BenchRow& row : report.rows) {
      measured[grad_accum].push_back(row.payload_bytes_per_step);
    }
  }
  // Beyond the planned collectives every row moves the same few bytes per step (the step
  // verdict's all-reduce of 2 x world doubles): the measured bytes are the plan's plus that.
  const std::int64_t verdict = measured[1][0] - planned[1][0];
  CHECK(verdict == 2 * world.size * 8);
  for (std::size_t i = 0; i < modes.size(); ++i) {
    INFO(modes[i]);
    CHECK(measured[1][i] == planned[1][i] + verdict);
    CHECK(measured[3][i] == planned[3][i] + verdict);
    if (i == 0) CHECK(planned[3][i] == planned[1][i]);  // stage 1 reduces once per step
    if (i > 0) CHECK(planned[3][i] > planned[1][i]);
  }
}

TEST_CASE("the alpha-beta model of the link", "[link]") {
  const LinkConfig link{8.0, 10.0};  // 1 GB/s, 10 us
  CHECK(modelled_seconds(link, CollectiveOp::AllReduce, 1'000'000'000, 2) == Approx(1.0 + 20e-6));
  CHECK(modelled_seconds(link, CollectiveOp::AllReduce, 1'000'000'000, 4) == Approx(1.5 + 60e-6));
  CHECK(modelled_seconds(link, CollectiveOp::Broadcast, 1'000'000'000, 4) == Approx(0.75 + 30e-6));
  CHECK(modelled_seconds(link, CollectiveOp::Reduce, 1'000'000'000, 2) == Approx(0.5 + 10e-6));
  // A reduce-scatter and an all-gather of the whole buffer: (p-1)/p of it each, one all-reduce.
  CHECK(modelled_seconds(link, CollectiveOp::ReduceScatter, 1'000'000'000, 4) ==
        Approx(0.75 + 30e-6));
  CHECK(modelled_seconds(link, CollectiveOp::AllGather, 1'000'000'000, 4) == Approx(0.75 + 30e-6));
  CHECK(wire_bytes(CollectiveOp::ReduceScatter, 1'000'000, 4) +
            wire_bytes(CollectiveOp::AllGather, 1'000'000, 4) ==
        wire_bytes(CollectiveOp::AllReduce, 1'000'000, 4));
  CHECK(modelled_seconds(link, CollectiveOp::AllReduce, 1'000'000'000, 1) == 0.0);
  CHECK(link_label(link) == "simulated link: 8 Gb/s, 10 us");
  CHECK(link_label(LinkConfig{}).empty());
}

TEST_CASE("a collective on the simulated link takes at least the modelled time", "[link]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const LinkConfig config{1.0, 200.0};  // 1 Gb/s, 200 us
  auto link = std::make_shared<SimulatedLink>(config);
  const LinkSpan span = flat_link_span(config, world.size);
  SimulatedLinkCommunicator comm(std::make_unique<MpiCommunicator>(world.comm, "link.a", 60.0),
                                 link, span);
  SimulatedLinkCommunicator other(std::make_unique<MpiCommunicator>(world.comm, "link.b", 60.0),
                                  link, span);
  const std::int64_t n = 1 << 18;  // 1 MiB
  const std::int64_t bytes = n * 4;
  std::vector<float> buf(static_cast<std::size_t>(n));

  struct Case {
    CollectiveOp op;
    const char* name;
  };
  for (const Case c : {Case{CollectiveOp::AllReduce, "all_reduce"}, Case{CollectiveOp::Reduce, "reduce"},
                       Case{CollectiveOp::Broadcast, "broadcast"},
                       Case{CollectiveOp::ReduceScatter, "reduce_scatter"},
                       Case{CollectiveOp::AllGather, "all_gather"}}) {
    SECTION(c.name) {
      std::fill(buf.begin(), buf.end(), static_cast<float>(world.rank + 1));
      comm.reset_stats();
      MPI_Barrier(world.comm);
      const auto start = Clock::now();
      Work w = c.op == CollectiveOp::AllReduce ? comm.all_reduce(buf.data(), n, ReduceOp::Sum)
               : c.op == CollectiveOp::Reduce  ? comm.reduce(buf.data(), n, 0, ReduceOp::Sum)
               : c.op == CollectiveOp::ReduceScatter
                   ? comm.reduce_scatter(buf.data(), n, DType::F32, ReduceOp::Sum)
               : c.op == CollectiveOp::AllGather ? comm.all_gather(buf.data(), n, DType::F32)
                                                 : comm.broadcast(buf.data(), n, 0);
      w.wait();
      const double elapsed = seconds_since(start);
      const double modelled = modelled_seconds(config, c.op, bytes, world.size);
      CHECK(elapsed >= modelled);
      CHECK(comm.stats().busy_seconds >= modelled);
      CHECK(comm.stats().wire_bytes == wire_bytes(c.op, bytes, world.size));
      // The real collective ran: the data is what MPI alone gives.
      const float sum = static_cast<float>(world.size * (world.size + 1) / 2);
      const std::int64_t shard = n / world.size;
      if (c.op == CollectiveOp::ReduceScatter) {  // this rank's shard holds the sum
        CHECK(buf[static_cast<std::size_t>(world.rank * shard)] == sum);
        CHECK(buf[static_cast<std::size_t>((world.rank + 1) * shard - 1)] == sum);
      } else if (c.op == CollectiveOp::AllGather) {  // shard r is rank r's
        CHECK(buf.front() == 1.0f);
        CHECK(buf.back() == static_cast<float>(world.size));
      } else {
        const float expected = c.op == CollectiveOp::Broadcast ? 1.0f
                             : c.op == CollectiveOp::Reduce && world.rank != 0
                                 ? static_cast<float>(world.rank + 1)
                                 : sum;
        CHECK(buf.front() == expected);
        CHECK(buf.back() == expected);
      }
    }
  }

  SECTION("all_gather_from") {  // the stage-3 gather: the rank's shard read from elsewhere
    const std::int64_t shard = n / world.size;
    std::vector<float> own(static_cast<std::size_t>(shard), static_cast<float>(world.rank + 1));
    std::fill(buf.begin(), buf.end(), -1.0f);
    comm.reset_stats();
    MPI_Barrier(world.comm);
    const auto start = Clock::now();
    comm.all_gather_from(own.data(), buf.data(), n, DType::F32).wait();
    const double modelled = modelled_seconds(config, CollectiveOp::AllGather, bytes, world.size);
    CHECK(seconds_since(start) >= modelled);
    CHECK(comm.stats().wire_bytes == wire_bytes(CollectiveOp::AllGather, bytes, world.size));
    CHECK(buf.front() == 1.0f);
    CHECK(buf.back() == static_cast<float>(world.size));
  }

  SECTION("two streams of one rank share the link") {
    std::vector<float> second(buf.size());
    MPI_Barrier(world.comm);
    const auto start = Clock::now();
    Work a = comm.all_reduce(buf.data(), n, ReduceOp::Sum);
    Work b = other.broadcast(second.data(), n, 0);
    a.wait();
    b.wait();
    const double elapsed = seconds_since(start);
    CHECK(elapsed >= modelled_seconds(config, CollectiveOp::AllReduce, bytes, world.size) +
                         modelled_seconds(config, CollectiveOp::Broadcast, bytes, world.size));
  }
}

TEST_CASE("a modelled wait longer than the timeout fails naming the rank and operation",
          "[link]") {
  // link.latency_us = 1e7 with runtime.timeout_s = 5 used to sleep out the whole modelled time.
  const World world = test::world_of(MPI_COMM_WORLD);
  if (world.size < 2) return;  // one rank has no link to model
  auto link = std::make_shared<SimulatedLink>(LinkConfig{0.0, 1e7}, /*timeout_s=*/0.5);
  SimulatedLinkCommunicator comm(std::make_unique<MpiCommunicator>(world.comm, "link.t", 60.0),
                                 link, flat_link_span(link->config(), world.size));
  std::vector<float> buf(16, 1.0f);
  const auto start = Clock::now();
  Work w = comm.all_reduce(buf.data(), 16, ReduceOp::Sum);
  CHECK_THROWS_WITH(w.wait(), Catch::Contains(fmt::format("rank {}: all_reduce", world.rank)) &&
                                  Catch::Contains("runtime.timeout_s = 0.5") &&
                                  Catch::Contains("link.latency_us = 10000000"));
  CHECK(seconds_since(start) < 5.0);
}

TEST_CASE("with link.ranks a collective takes an N-rank job's modelled time, also at one rank",
          "[link]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  // Latency-bound at 0.4 s, so that the real collective (0.1 s on a loaded machine under ASan)
  // ends well inside the modelled wait and a second wait would show past any scheduling noise.
  LinkConfig config{2.0, 28000.0};
  config.ranks = 8;  // 2(p-1)/p * 1 MiB / 0.25 GB/s + 14 * 28 ms = 0.4 s whatever world.size is
  auto link = std::make_shared<SimulatedLink>(config);
  SimulatedLinkCommunicator comm(std::make_unique<MpiCommunicator>(world.comm, "link.r", 60.0),
                                 link, flat_link_span(config, world.size));
  const std::int64_t n = 1 << 18;
  std::vector<float> buf(static_cast<std::size_t>(n), 1.0f);
  const double modelled = modelled_seconds(config, CollectiveOp::AllReduce, n * 4, world.size);
  REQUIRE(modelled == Approx(2.0 * 7.0 / 8.0 * (n * 4) / 0.25e9 + 14 * 28000e-6));
  MPI_Barrier(world.comm);
  const auto start = Clock::now();
  comm.all_reduce(buf.data(), n, ReduceOp::Sum).wait();
  CHECK(seconds_since(start) >= modelled);
  CHECK(comm.stats().busy_seconds >= modelled);
  // And not much later: one modelled wait, not one per hop or per host task (2x). Loose, as the
  // host's sleep overshoots on a loaded machine; the GPU's delay kernels are held to 1.1x + 50 us
  // (tests/mpi/test_cuda_link.cpp).
  CHECK(comm.stats().busy_seconds < 1.5 * modelled);
  CHECK(comm.stats().wire_bytes == wire_bytes(CollectiveOp::AllReduce, n * 4, 8));
  CHECK(buf.front() == static_cast<float>(world.size));  // the real all-reduce ran
}

TEST_CASE("training on the simulated link gives bitwise the same parameters", "[link]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  for (const char* mode : {"ddp", "zero/interleaved/reduce_broadcast", "zero/after_backward/allreduce_broadcast"}) {
    INFO(mode);
    std::vector<std::string> overrides{"train.steps=6", "parallel.bucket_cap_mb=0.002",
                                       "parallel.first_bucket_cap_mb=0.001"};
    const std::string m(mode);
    if (m != "ddp") {
      const auto first = m.find('/'), second = m.find('/', first + 1);
      overrides.push_back("parallel.mode=zero");
      overrides.push_back("parallel.overlap=" + m.substr(first + 1, second - first - 1));
      overrides.push_back("parallel.collective=" + m.substr(second + 1));
    }
    auto run = [&](bool link) {
      auto o = overrides;
      if (link) {
        o.push_back("link.bandwidth_gbps=2.0");
        o.push_back("link.latency_us=50.0");
      }
      Trainer trainer(test::small_config(o), world, test::quiet_options());
      for (int s = 0; s < 6; ++s) trainer.train_step();
      return test::parameters_of(trainer);
    };
    const std::vector<float> plain = run(false), modelled = run(true);
    REQUIRE(plain.size() == modelled.size());
    CHECK(std::memcmp(plain.data(), modelled.data(), plain.size() * sizeof(float)) == 0);
    CHECK(test::identical_on_all_ranks(modelled, world.comm));
  }
}

namespace {

struct Span {
  double begin = 0.0, end = 0.0;
};

// Per rank: for each bucket, the k-th "bucket b <collective>" span on comm.reduce and the k-th
// optimizer "step" span of b, in time order (occurrence k = training step k).
struct BucketSpans {
  std::map<int, std::vector<Span>> collective, step;
};

std::map<int, BucketSpans> bucket_spans(const nlohmann::json& trace) {
  std::map<int, BucketSpans> out;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || !e.at("args").contains("bucket")) continue;
    const int rank = e.at("pid").get<int>();
    const int bucket = e.at("args").at("bucket").get<int>();
    const Span s{e.at("ts").get<double>(), e.at("ts").get<double>() + e.at("dur").get<double>()};
    const std::string name = e.at("name").get<std::string>();
    if (name == "step") out[rank].step[bucket].push_back(s);
    const bool reduce_op = e.at("args").value("op", "") == "reduce" ||
                           e.at("args").value("op", "") == "all_reduce";
    if (name.rfind("bucket ", 0) == 0 && reduce_op) out[rank].collective[bucket].push_back(s);
  }
  for (auto& [rank, spans] : out) {
    for (auto* m : {&spans.collective, &spans.step}) {
      for (auto& [b, v] : *m) {
        std::sort(v.begin(), v.end(), [](const Span& x, const Span& y) { return x.begin < y.begin; });
      }
    }
  }
  return out;
}

// Traces `steps` steps of `overlap` and returns rank 0's parsed trace.json (empty elsewhere).
nlohmann::json traced_run(const World& world, const std::string& overlap, int steps) {
  const std::string dir = fresh_dir("trace_" + overlap);
  Trainer trainer(test::small_config({"parallel.mode=zero", "parallel.overlap=" + overlap,
                                      "parallel.collective=reduce_broadcast",
                                      "parallel.bucket_cap_mb=0.002",
                                      "parallel.first_bucket_cap_mb=0.001", "output.trace=true",
                                      "link.bandwidth_gbps=0.5"}),
                  world, test::quiet_options());
  for (int s = 0; s < steps; ++s) trainer.train_step();
  trainer.synchronize();
  write_trace(world, trainer.tracer(), trainer.tracer().events(), dir + "/trace.json", 60.0);
  if (!world.is_root()) return {};
  std::ifstream in(dir + "/trace.json");
  return nlohmann::json::parse(in);
}

// Whether, in some step on some rank, a bucket's optimizer step began before the collective of a
// later bucket (of the same step) ended.
bool step_overlaps_later_collective(const nlohmann::json& trace, int steps) {
  for (const auto& [rank, spans] : bucket_spans(trace)) {
    for (const auto& [b, step_spans] : spans.step) {
      for (const auto& [later, coll_spans] : spans.collective) {
        if (later <= b) continue;
        for (int k = 0; k < steps && k < static_cast<int>(step_spans.size()) &&
                        k < static_cast<int>(coll_spans.size());
             ++k) {
          if (step_spans[static_cast<std::size_t>(k)].begin < coll_spans[static_cast<std::size_t>(k)].end) {
            return true;
          }
        }
      }
    }
  }
  return false;
}

}  // namespace

TEST_CASE("the trace is valid Chrome JSON with one process per rank and per-layer spans", "[trace]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const int steps = 4;
  const nlohmann::json trace = traced_run(world, "interleaved", steps);
  if (!world.is_root()) return;
  REQUIRE(trace.at("traceEvents").is_array());
  std::set<int> pids, named;
  std::set<std::string> names, threads;
  for (const auto& e : trace.at("traceEvents")) {
    pids.insert(e.at("pid").get<int>());
    if (e.at("ph") == "M" && e.at("name") == "process_name") named.insert(e.at("pid").get<int>());
    if (e.at("ph") == "M" && e.at("name") == "thread_name") threads.insert(e.at("args").at("name"));
    if (e.at("ph") == "X") {
      names.insert(e.at("name").get<std::string>());
      CHECK(e.at("dur").get<double>() >= 0.0);
    }
  }
  CHECK(pids.size() == static_cast<std::size_t>(world.size));
  CHECK(named == pids);
  CHECK(threads.count("main") == 1);
  CHECK(threads.count("comm.reduce") == 1);
  CHECK(threads.count("comm.broadcast") == 1);
  for (const char* name : {"forward", "backward", "step", "layers.0", "layers.2", "linear 0",
                           "linear 2", "bucket 0 broadcast"}) {
    INFO(name);
    CHECK(names.count(name) == 1);
  }
  if (world.size > 1) {
    CHECK(names.count("bucket 0 reduce") == 1);
    CHECK(names.count("link reduce") == 1);
    // Interleaved: a bucket is stepped while later buckets are still being reduced.
    CHECK(step_overlaps_later_collective(trace, steps));
  }
}

TEST_CASE("in overlap none every step starts after the step's last collective", "[trace]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const nlohmann::json trace = traced_run(world, "none", 3);
  if (!world.is_root() || world.size == 1) return;
  CHECK_FALSE(step_overlaps_later_collective(trace, 3));
}

TEST_CASE("a one-rank bench with link.ranks = 8 is timed against an 8-rank job's link",
          "[bench-link]") {
  // One rank, every collective modelled as one of 8 ranks: the real collectives are local, the
  // modelled ones are not. Assertions are on what the model and the timeline account for, never
  // on how fast anything ran. Three buckets: the last layer alone (first_bucket_cap_mb), the
  // 1024x1024 layer (whose backward, milliseconds long, runs while bucket 0 is on the link), the
  // first layer.
  const World world = test::world_of(MPI_COMM_WORLD);
  REQUIRE(world.size == 1);
  const std::string dir = fresh_dir("bench_link_ranks");
  const Config config = test::small_config(
      {"model.widths=[8, 1024, 1024, 4]", "data.batch_size=128", "bench.warmup=1",
       "bench.steps=3", "bench.bucket_cap_mb=1.0", "parallel.first_bucket_cap_mb=0.05",
       "bench.modes=[\"zero/none/reduce_broadcast\", \"zero/interleaved/reduce_broadcast\"]",
       "link.ranks=8", "link.bandwidth_gbps=4", "link.latency_us=200",
       "output.dir=\"" + dir + "\""});
  BenchOptions options;
  options.progress = false;
  const BenchReport report = run_bench(config, world, options);
  REQUIRE(report.rows.size() == 2);
  CHECK(report.link.ranks == 8);

  // The model's time of one step's collectives, by hand from the plan.
  const Model model(config.model, DeviceKind::Cpu);
  const BucketPlan plan = build_bucket_plan(model.store(), 1.0, 0.05, 1, config.parallel.assignment);
  REQUIRE(plan.buckets.size() == 3);
  double reduces = 0.0, broadcasts = 0.0;
  for (const Bucket& b : plan.buckets) {
    reduces += modelled_seconds(config.link, CollectiveOp::Reduce, b.bytes(), 1);
    broadcasts += modelled_seconds(config.link, CollectiveOp::Broadcast, b.bytes(), 1);
  }
  REQUIRE(reduces > 0.0);  // at one real rank (p - 1) / p would have made it 0

  const BenchRow& none = report.rows[0];
  const BenchRow& interleaved = report.rows[1];
  for (const BenchRow* row : {&none, &interleaved}) {
    INFO(row->mode);
    // Each collective, timed alone in the limits, took at least its modelled time, and so did
    // every step's collectives on the timeline (one link: they cannot overlap each other).
    CHECK(row->comm_model_s >= 0.999 * (reduces + broadcasts));
    CHECK(row->comm_s >= 0.999 * (reduces + broadcasts));
    CHECK(row->exposed_comm_s + row->hidden_comm_s == Approx(row->comm_s).margin(1e-9));
    CHECK(row->wire_bytes_per_step > 0);  // the modelled ranks' bytes
  }
  // none: the broadcasts run after every step while the main thread waits, so at least all of
  // their modelled time is exposed; the step is at least compute + that.
  CHECK(none.exposed_comm_s >= 0.999 * broadcasts);
  // interleaved: bucket 0 is on the link while backward computes the 1024x1024 layer.
  CHECK(interleaved.hidden_comm_s > 0.0);
  CHECK(interleaved.bucket_step_s.size() == 3);
}
