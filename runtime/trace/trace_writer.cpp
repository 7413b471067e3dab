// write_trace / merge_trace_events: gathering and merging Chrome trace events (see trace_writer.h).
#include "runtime/trace/trace_writer.h"

#include <filesystem>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "base/checked_write.h"
#include "base/errors.h"
#include "runtime/comm/timed_mpi.h"
#include "runtime/trace/metrics.h"

namespace zl {

nlohmann::json merge_trace_events(const std::vector<TraceSource>& sources, int rank) {
  std::vector<std::string> threads;
  auto thread_id = [&](const std::string& name) {
    for (std::size_t i = 0; i < threads.size(); ++i) {
      if (threads[i] == name) return static_cast<int>(i);
    }
    threads.push_back(name);
    return static_cast<int>(threads.size() - 1);
  };
  nlohmann::json spans = nlohmann::json::array();
  for (const TraceSource& source : sources) {
    std::map<int, int> remap;  // this source's tid -> merged tid
    for (const auto& e : source.events) {
      if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") {
        remap[e.at("tid").get<int>()] = thread_id(e.at("args").at("name").get<std::string>());
      }
    }
    for (const auto& e : source.events) {
      if (e.value("ph", "") == "M") continue;
      nlohmann::json copy = e;
      const int tid = e.value("tid", 0);
      const auto named = remap.find(tid);
      copy["tid"] = named != remap.end() ? named->second : thread_id(fmt::format("thread {}", tid));
      copy["pid"] = rank;
      copy["ts"] = e.value("ts", 0.0) + source.offset_us;
      spans.push_back(std::move(copy));
    }
  }
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank},
                 {"args", {{"name", fmt::format("rank {}", rank)}}}});
  out.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank},
                 {"args", {{"sort_index", rank}}}});
  for (std::size_t i = 0; i < threads.size(); ++i) {
    out.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank},
                   {"tid", static_cast<int>(i)}, {"args", {{"name", threads[i]}}}});
  }
  for (auto& e : spans) out.push_back(std::move(e));
  return out;
}

ClockOffset estimate_clock_offset(const World& world, const Tracer& clock, const WaitLimit& limit,
                                  int rounds) {
  constexpr int kTag = 7101;  // this exchange's own, apart from any other message on world.comm
  ClockOffset best{0.0, std::numeric_limits<double>::infinity()};
  if (world.is_root()) {
    for (int r = 1; r < world.size; ++r) {
      const std::string what = fmt::format("the trace's clock exchange with rank {}", r);
      for (int i = 0; i < rounds; ++i) {
        double ping = 0.0;
        timed_recv(&ping, 1, MPI_DOUBLE, r, kTag, world.comm, limit, what);
        const double root_us = clock.now_us();
        timed_send(&root_us, 1, MPI_DOUBLE, r, kTag, world.comm, limit, what);
      }
    }
    return {0.0, 0.0};
  }
  const std::string what = "the trace's clock exchange with rank 0";
  for (int i = 0; i < rounds; ++i) {
    const double t0 = clock.now_us();
    timed_send(&t0, 1, MPI_DOUBLE, 0, kTag, world.comm, limit, what);
    double root_us = 0.0;
    timed_recv(&root_us, 1, MPI_DOUBLE, 0, kTag, world.comm, limit, what);
    const double t1 = clock.now_us();
    if (t1 - t0 < best.round_trip_us) best = {root_us - (t0 + t1) / 2, t1 - t0};
  }
  return best;
}

void write_trace(const World& world, const Tracer& clock, nlohmann::json events,
                 const std::string& path, double timeout_s, const nlohmann::json& metadata) {
  const WaitLimit limit{world.rank, timeout_s};
  // Each rank's events move onto rank 0's clock. Not by taking the instant the ranks leave a
  // barrier as the same time: they leave it up to hundreds of microseconds apart when ranks
  // outnumber cores or the scheduler interferes, and the trace then shows a collective ending on
  // one rank before another rank began it, which cannot happen.
  const ClockOffset offset = estimate_clock_offset(world, clock, limit);
  double round_trip_us = offset.round_trip_us;
  std::vector<double> round_trips(static_cast<std::size_t>(world.size), 0.0);
  timed_gather(&round_trip_us, 1, MPI_DOUBLE, round_trips.data(), 1, MPI_DOUBLE, 0, world.comm,
               limit, "gathering the trace's clock round trips");

  for (auto& e : events) {
    if (e.contains("ts")) e["ts"] = e["ts"].get<double>() + offset.offset_us;
  }
  const std::string mine = events.dump();
  events = nlohmann::json();  // a long trace is held once at a time: as events, then as text
  if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw RuntimeFailure(fmt::format("rank {}: trace of {} bytes is too large to gather",
                                     world.rank, mine.size()));
  }
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(world.size), 0);
  timed_gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, world.comm, limit,
               "gathering the trace's sizes");
  std::vector<int> displs(lengths.size(), 0);
  std::int64_t total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    displs[r] = static_cast<int>(total);
    total += lengths[r];
  }
  if (world.is_root() && total > std::numeric_limits<int>::max()) {
    throw RuntimeFailure(
        fmt::format("trace of {} bytes over all ranks is too large to gather", total));
  }
  std::string all(world.is_root() ? static_cast<std::size_t>(total) : 0, '\0');
  timed_gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), displs.data(), 0,
                world.comm, limit, "gathering the trace's events");
  if (!world.is_root()) return;

  nlohmann::json trace_events = nlohmann::json::array();
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    for (auto& e : nlohmann::json::parse(all.substr(static_cast<std::size_t>(displs[r]),
                                                    static_cast<std::size_t>(lengths[r])))) {
      trace_events.push_back(std::move(e));
    }
  }
  nlohmann::json other = metadata;
  other["clock_round_trip_us"] = round_trips;
  nlohmann::json file = {{"traceEvents", std::move(trace_events)},
                         {"displayTimeUnit", "ms"},
                         {"otherData", std::move(other)}};
  const std::filesystem::path out(path);
  if (out.has_parent_path()) ensure_output_dir(out.parent_path().string());
  replace_whole_file(path, file.dump() + '\n', "the trace");
}

}  // namespace zl
