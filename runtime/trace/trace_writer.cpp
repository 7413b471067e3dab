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

void write_trace(const World& world, const Tracer& clock, const nlohmann::json& events,
                 const std::string& path, double timeout_s, const nlohmann::json& metadata) {
  const WaitLimit limit{world.rank, timeout_s};
  // Clock alignment: the instant every rank leaves the barrier is taken as the same time. The
  // first barrier waits for the slowest rank (polled, so an early rank may notice its end up to
  // ~12% of its wait late: Note [Polling back-off]); every rank enters the second within that
  // slack, so it completes while they still spin, and its exit is the aligned instant.
  timed_barrier(world.comm, limit, "the barrier before gathering the trace");
  timed_barrier(world.comm, limit, "the barrier that aligns the trace's clocks");
  const double sync_us = clock.now_us();
  double root_sync_us = sync_us;
  timed_bcast(&root_sync_us, 1, MPI_DOUBLE, 0, world.comm, limit,
              "broadcasting the trace's clock origin");

  nlohmann::json shifted = events;
  for (auto& e : shifted) {
    if (e.contains("ts")) e["ts"] = e["ts"].get<double>() + (root_sync_us - sync_us);
  }
  const std::string mine = shifted.dump();
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
  nlohmann::json file = {{"traceEvents", std::move(trace_events)},
                         {"displayTimeUnit", "ms"},
                         {"otherData", metadata}};
  const std::filesystem::path out(path);
  if (out.has_parent_path()) ensure_output_dir(out.parent_path().string());
  write_whole_file(path, file.dump() + '\n', "the trace");
}

}  // namespace zl
