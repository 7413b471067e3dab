// The bench's printed report (runtime/bench/bench_report.h): the default tables fit 100 columns
// with the longest mode names, --wide keeps every column, and rows the machine's load made
// unreliable are marked and named as noisy, in the table and in the JSON and CSV.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "runtime/bench/bench_report.h"
#include "runtime/config/mode.h"

using namespace zl;

namespace {

BenchRow row(const std::string& precision, const std::string& mode, double step_ms) {
  BenchRow r;
  r.precision = precision;
  r.reduce_dtype = precision == "bf16" ? "bf16" : "fp32";
  r.master_weights = "fp32";
  r.mode = mode;
  r.bucket_cap_mb = 25;
  r.buckets = 12;
  r.samples_per_step = 2048;
  r.step_s = r.step_median_s = step_ms * 1e-3;
  r.step_p10_s = 0.95 * r.step_s, r.step_p90_s = 1.05 * r.step_s;
  r.samples_per_s = 2048 / r.step_s;
  r.speedup_vs_ddp = 1.07;
  r.forward_s = 0.3 * r.step_s, r.backward_s = 0.6 * r.step_s, r.optimizer_s = 0.05 * r.step_s;
  r.compute_s = 0.9 * r.step_s;
  r.reduction_s = r.broadcast_s = r.comm_s = 0.4 * r.step_s;
  r.hidden_comm_s = 0.3 * r.step_s, r.exposed_comm_s = 0.1 * r.step_s;
  r.comm_model_s = 0.35 * r.step_s, r.ideal_step_s = 0.92 * r.step_s;
  r.vs_ideal = r.step_s / r.ideal_step_s;
  r.wire_bytes_per_step = 123456789;
  r.state_bytes = r.planned_state_bytes = {1234567890, 1234567890};
  r.peak_rss_bytes = {2345678901, 2345678901};
  return r;
}

BenchReport report() {
  BenchReport rep;
  rep.config_path = "configs/bench_large.toml";
  rep.world_size = 512;
  rep.parameters = 123456789012;
  rep.warmup = 3, rep.steps = 10;
  rep.link.bandwidth_gbps = 400, rep.link.latency_us = 5, rep.link.ranks = 512;
  rep.link_label = "simulated link: 400 Gb/s, 5 us, ring of 512 ranks";
  rep.cpu_threads = 16;
  for (const char* precision : {"fp32", "bf16"}) {
    for (const char* mode : {"ddp", "zero/none/allreduce_broadcast",
                             "zero/after_backward/allreduce_broadcast",
                             "zero/interleaved/reduce_broadcast"}) {
      rep.rows.push_back(row(precision, mode, 2345.67));
    }
  }
  BenchLimits& l = rep.limits;
  l.triad_gbps = 123.4;
  PrecisionLimits p;
  p.precision = "bf16";
  p.gemm_kernel = "oneDNN 2.6.3, bf16 kernel brg:avx512_core_amx (avx512_core_amx), dispatch up "
                  "to avx512_core_amx, CPU avx512_core_amx";
  p.gemm = {{"backward_weight", 123456, 123456, 123456, 100, 12345.6}};
  p.gemm_step_s = 1.5, p.optimizer_gbps = 1234.5, p.optimizer_bytes_per_element = 28;
  p.optimizer_vs_triad = 0.9;
  l.precisions = {p};
  l.collectives = {{"all_reduce", DType::F32, std::int64_t{1} << 34, 12.3, 1234.56, 2345.67,
                    LinkTier::Inter, 512}};
  return rep;
}

std::size_t widest_line(const std::string& text) {
  std::istringstream lines(text);
  std::size_t widest = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > kNarrowTableColumns) UNSCOPED_INFO("wider than 100: " << line);
    widest = std::max(widest, line.size());
  }
  return widest;
}

}  // namespace

TEST_CASE("the bench's default tables fit 100 columns; --wide has every column", "[bench_report]") {
  const BenchReport rep = report();
  const std::string narrow = format_bench_table(rep);
  CHECK(widest_line(narrow) <= kNarrowTableColumns);
  CHECK_THAT(narrow, Catch::Contains("zero/after_backward/allreduce_broadcast") &&
                         Catch::Contains("16 GEMM threads per rank, comm threads") &&
                         Catch::Contains("state MiB") && Catch::Contains("x ddp"));
  CHECK_THAT(narrow, !Catch::Contains("noisy"));  // every row within the limits
  const std::string wide = format_bench_table(rep, TableWidth::Wide);
  CHECK(widest_line(wide) > kNarrowTableColumns);
  CHECK_THAT(wide, Catch::Contains("samples/s") && Catch::Contains("f+b+o") &&
                       Catch::Contains("ideal") && Catch::Contains("idle") &&
                       Catch::Contains("bf16 rows: reduce_dtype bf16"));
  CHECK_THAT(narrow, Catch::Contains("bf16 (reduce_dtype bf16, master_weights fp32), bucket_cap_mb 25:"));
  // The CSV keeps every column whatever the table shows.
  const std::string csv = bench_to_csv(rep);
  CHECK_THAT(csv.substr(0, csv.find('\n')),
             Catch::Contains("samples_per_s") && Catch::Contains("idle_s") &&
                 Catch::Contains("peak_rss_bytes_max") && Catch::Contains("noisy"));
}

TEST_CASE("every mode's rows fit 100 columns, marked noisy, in both narrow tables",
          "[bench_report]") {
  BenchReport rep = report();
  rep.link.node_ranks = 8;  // the per-tier table too
  rep.rows.clear();
  for (const double cap : {2.0, 8.0}) {
    for (const Mode& mode : all_modes({2})) {
      rep.rows.push_back(row("fp32", mode.name(), 2345.67));
      rep.rows.back().bucket_cap_mb = cap;
      rep.rows.back().vs_ideal = 0.4;  // the noisy mark
    }
  }
  rep.limits.collectives.push_back({"reduce_scatter", DType::F32, std::int64_t{1} << 34, 12.3,
                                    1234.56, 2345.67, LinkTier::Inter, 512});
  const std::string table = format_bench_table(rep);
  CHECK(widest_line(table) <= kNarrowTableColumns);
  CHECK_THAT(table, Catch::Contains("  reduce_scatter fp32 ") && Catch::Contains("  all_reduce     fp32 "));
  CHECK_THAT(table, Catch::Contains("zero2/after_backward/reduce_scatter_allgather") &&
                        Catch::Contains("hsdp3/after_backward@2"));
  // Each narrow table names each cap once, above its rows: 3 tables (with the tiers' 4).
  for (const char* group : {"\nfp32, bucket_cap_mb 2:\nddp ", "\nfp32, bucket_cap_mb 8:\nddp "}) {
    std::size_t count = 0;
    for (auto at = table.find(group); at != std::string::npos; at = table.find(group, at + 1)) {
      ++count;
    }
    CHECK(count == 4);
  }
}

TEST_CASE("with two link tiers the limits show each tier's collectives", "[bench_report]") {
  BenchReport rep = report();
  rep.link.node_ranks = 8;
  rep.link.intra_gbps = 3600;
  rep.limits.collectives.push_back(
      {"all_reduce", DType::F32, std::int64_t{1} << 34, 1.23, 1234.56, 2345.67, LinkTier::Intra, 8,
       8, 1});
  // A hybrid row's replicas: one rank of every node.
  rep.limits.collectives.push_back({"all_reduce", DType::F32, std::int64_t{1} << 30, 0.5, 2.0,
                                    3.9, LinkTier::Inter, 64, 64, 8});
  const std::string table = format_bench_table(rep);
  CHECK(widest_line(table) <= kNarrowTableColumns);
  CHECK_THAT(table, Catch::Contains("per tier of the link (nodes of 8 ranks)") &&
                        Catch::Contains("inter MB"));
  CHECK_THAT(table,
             Catch::Contains("  between nodes (link.bandwidth_gbps), every rank, timed as 512 "
                             "ranks:\n  all_reduce fp32") &&
                 Catch::Contains("  inside a node (link.intra_gbps), 8 consecutive ranks, timed "
                                 "as 8 ranks:\n  all_reduce fp32") &&
                 Catch::Contains("  between nodes (link.bandwidth_gbps), 64 ranks 8 apart, timed "
                                 "as 64 ranks:\n  all_reduce fp32"));
  const auto json = bench_to_json(rep);
  CHECK(json.at("simulated_link").at("node_ranks") == 8);
  CHECK(json.at("simulated_link").at("intra_gbps") == 3600.0);
  CHECK(json.at("limits").at("collectives").at(0).at("tier") == "inter");
  CHECK(json.at("limits").at("collectives").at(1).at("tier") == "intra");
  CHECK(json.at("limits").at("collectives").at(1).at("ranks") == 8);
  CHECK(json.at("limits").at("collectives").at(2).at("stride") == 8);
  // One tier: no headings.
  CHECK_THAT(format_bench_table(report()), !Catch::Contains("between nodes"));
}

TEST_CASE("rows the load made unreliable are marked noisy", "[bench_report]") {
  BenchReport rep = report();
  rep.rows[1].step_p90_s = 1.3 * rep.rows[1].step_p10_s;              // spread
  rep.rows[2].exposed_comm_s = 1.5 * rep.rows[2].comm_model_s;        // exposed > comm
  rep.rows[3].vs_ideal = 0.4;                                          // faster than possible
  // The longest mode name, marked: 101 columns before the narrow mark lost its space.
  rep.rows[3].mode = "zero3/interleaved/reduce_scatter_allgather";
  CHECK(noise_reason(rep.rows[0]).empty());
  CHECK(noise_reason(rep.rows[1]) == "p90/p10 1.30");
  CHECK(noise_reason(rep.rows[2]) == "exposed > comm");
  CHECK(noise_reason(rep.rows[3]) == "/ideal 0.40");
  for (const TableWidth width : {TableWidth::Narrow, TableWidth::Wide}) {
    const std::string table = format_bench_table(rep, width);
    CHECK_THAT(table, Catch::Contains("* noisy: 3 of 8 rows"));
    std::istringstream lines(table);
    int marked = 0;
    for (std::string line; std::getline(lines, line);) {
      // Wide: "... 0.40 *"; narrow: "... 0.40*" (the same width as an unmarked row and a space).
      const bool ends = width == TableWidth::Wide
                            ? line.size() > 2 && line.compare(line.size() - 2, 2, " *") == 0
                            : line.size() > 2 && line.back() == '*' && line[0] != '*' &&
                                  line[line.size() - 2] != ' ';  // not the "*** link ***" lines
      if (ends) ++marked;
    }
    CHECK(marked == 3);
    if (width == TableWidth::Narrow) CHECK(widest_line(table) <= kNarrowTableColumns);
  }
  const auto json = bench_to_json(rep);
  CHECK(json.at("results").at(0).at("noisy").is_null());
  CHECK(json.at("results").at(1).at("noisy") == "p90/p10 1.30");
  rep.rows[3].step_p90_s = 1.5 * rep.rows[3].step_p10_s;  // two reasons: one CSV cell still
  CHECK(noise_reason(rep.rows[3]) == "p90/p10 1.50; /ideal 0.40");
  const std::string csv = bench_to_csv(rep);
  std::istringstream lines(csv);
  std::string header, line;
  std::getline(lines, header);
  const auto columns = [](const std::string& l) {  // commas outside quoted cells
    int n = 0;
    bool quoted = false;
    for (const char c : l) {
      if (c == '"') quoted = !quoted;
      n += c == ',' && !quoted;
    }
    return n;
  };
  while (std::getline(lines, line)) CHECK(columns(line) == columns(header));
}

TEST_CASE("a row without communication shows no share hidden", "[bench_report]") {
  BenchReport rep = report();
  rep.link.node_ranks = 8;  // the per-tier table too
  rep.rows.resize(1);       // fp32 ddp
  rep.rows[0].comm_model_s = rep.rows[0].exposed_comm_s = 0.0;
  rep.rows[0].tiers = {};
  const std::string table = format_bench_table(rep);
  INFO(table);
  CHECK_THAT(table, !Catch::Contains("100%"));
  std::istringstream lines(table);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("ddp ", 0) == 0 && line.find(" - ") != std::string::npos) ++rows;
  }
  CHECK(rows == 2);  // the step table's row and the tier table's
}
