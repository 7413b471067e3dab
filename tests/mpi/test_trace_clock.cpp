// MPI tests of the trace's clock alignment (runtime/trace/trace_writer.h): the offset estimate
// against the true offset of the Tracers' origins (one host: steady_clock is the same clock in
// every process), and a traced run's all-reduces, reduce-scatters and all-gathers overlapping
// across ranks, as they must since none completes before every rank has begun it. The bounds are
// each rank's measured round trip, not fixed times, so they hold on a loaded machine.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/trace/trace_writer.h"
#include "tests/mpi/mpi_test_util.h"

using namespace zl;

namespace {

// `clock`'s origin on steady_clock, in us: of a few back-to-back readings, the one that lost the
// least time between them (each reading is at most the origin).
double origin_us(const Tracer& clock) {
  double best = -1e300;
  for (int i = 0; i < 10; ++i) {
    const double steady = std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count();
    best = std::max(best, steady - clock.now_us());
  }
  return best;
}

}  // namespace

TEST_CASE("the clock offset to rank 0 is found within half a round trip", "[trace-clock]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  Tracer clock(world.rank, true);
  // Rank r's origin 50 ms * r after rank 0's: its clock reads that much less.
  MPI_Barrier(MPI_COMM_WORLD);
  std::this_thread::sleep_for(std::chrono::milliseconds(50 * world.rank));
  clock.reset_origin();
  const ClockOffset got = estimate_clock_offset(world, clock, {world.rank, 60.0});
  std::vector<double> origins(static_cast<std::size_t>(world.size), 0.0);
  const double mine = origin_us(clock);
  MPI_Allgather(&mine, 1, MPI_DOUBLE, origins.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
  const double want = mine - origins[0];
  INFO(fmt::format("rank {}: offset {} us, true {} us, round trip {} us", world.rank,
                   got.offset_us, want, got.round_trip_us));
  if (world.is_root()) {
    CHECK(got.offset_us == 0.0);
    CHECK(got.round_trip_us == 0.0);
    return;
  }
  CHECK(want > 25'000.0 * world.rank);  // the shift is there (less any lateness of rank 0's)
  CHECK(std::abs(got.offset_us - want) <= got.round_trip_us / 2 + 1.0);
  CHECK(std::abs(got.offset_us - want) <= 2'000.0);
}

TEST_CASE("a trace's synchronizing collectives overlap across ranks", "[trace-clock]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const std::string dir = test::shared_dir(MPI_COMM_WORLD, "trace_clock");
  Trainer trainer(test::small_config({"parallel.mode=zero",
                                      "parallel.collective=reduce_scatter_allgather",
                                      "parallel.bucket_cap_mb=0.002",
                                      "parallel.first_bucket_cap_mb=0.001", "output.trace=true"}),
                  world, test::quiet_options());
  for (int s = 0; s < 10; ++s) trainer.train_step();
  trainer.synchronize();
  write_trace(world, trainer.tracer(), trainer.tracer().events(), dir + "/trace.json", 60.0);
  if (!world.is_root()) return;

  std::ifstream in(dir + "/trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  const auto round_trips =
      trace.at("otherData").at("clock_round_trip_us").get<std::vector<double>>();
  REQUIRE(round_trips.size() == static_cast<std::size_t>(world.size));
  // Two ranks' spans are placed against each other to within the sum of their half round trips.
  const double tolerance_us = *std::max_element(round_trips.begin(), round_trips.end()) + 1.0;
  std::map<std::pair<int, int>, std::string> thread_names;  // (pid, tid) -> name
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      thread_names[{e.at("pid").get<int>(), e.at("tid").get<int>()}] = e.at("args").at("name");
    }
  }
  // (thread, span name) -> per rank, its [begin, end) in trace order.
  std::map<std::pair<std::string, std::string>,
           std::map<int, std::vector<std::pair<double, double>>>> spans;
  const std::set<std::string> synchronizing = {"all_reduce", "reduce_scatter", "all_gather"};
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || !synchronizing.contains(e.at("args").value("op", ""))) continue;
    const int pid = e.at("pid").get<int>();
    const double begin = e.at("ts").get<double>();
    spans[{thread_names.at({pid, e.at("tid").get<int>()}), e.at("name")}][pid].emplace_back(
        begin, begin + e.at("dur").get<double>());
  }
  REQUIRE(spans.size() >= 6);  // bucket and communicator spans of both kinds, the step's verdict
  int checked = 0;
  for (auto& [key, by_rank] : spans) {
    REQUIRE(by_rank.size() == static_cast<std::size_t>(world.size));
    for (auto& [rank, list] : by_rank) {
      std::sort(list.begin(), list.end());
      REQUIRE(list.size() == by_rank.at(0).size());
    }
    for (std::size_t k = 0; k < by_rank.at(0).size(); ++k) {
      double last_begin = -1e300, first_end = 1e300;
      for (const auto& [rank, list] : by_rank) {
        last_begin = std::max(last_begin, list[k].first);
        first_end = std::min(first_end, list[k].second);
      }
      INFO(fmt::format("{} on {}, occurrence {}: the last rank begins {} us after the first "
                       "ends (tolerance {} us)",
                       key.second, key.first, k, last_begin - first_end, tolerance_us));
      CHECK(last_begin <= first_end + tolerance_us);
      ++checked;
    }
  }
  CHECK(checked >= 60);
}
