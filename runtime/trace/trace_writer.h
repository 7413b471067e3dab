// Writing a run's trace: every rank's Tracer events gathered to rank 0 into one Chrome trace-event
// file ({"traceEvents": [...]}, opens in Perfetto / chrome://tracing), one process per rank, one
// thread per stream. Ranks' clocks are aligned at a barrier (each rank's timestamps are shifted so
// that the barrier's exit is the same instant on every rank), which also holds across nodes.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/tracer.h"
#include "runtime/comm/world.h"

namespace zl {

// One source of events for merge_trace_events: a Tracer's events() array, and the offset (us) to
// add to its timestamps to put it on a common clock.
struct TraceSource {
  nlohmann::json events;
  double offset_us = 0.0;
};

// Merges the events of several Tracers of one rank (the bench's runs) into one array: timestamps
// shifted by each source's offset, thread ids renumbered by thread name so that "main" is one
// thread across all sources, one set of process/thread-name metadata.
nlohmann::json merge_trace_events(const std::vector<TraceSource>& sources, int rank);

// Collective. `events` is this rank's array on the clock of `clock` (its now_us()). Rank 0 writes
// `path` (creating its directory); `metadata` goes to the file's "otherData" (e.g. the simulated
// link label). Every wait for another rank is bounded by `timeout_s` (runtime.timeout_s; a
// stopped peer: RuntimeFailure naming the rank and the step). Throws UserError when the file
// cannot be written.
void write_trace(const World& world, const Tracer& clock, const nlohmann::json& events,
                 const std::string& path, double timeout_s,
                 const nlohmann::json& metadata = nlohmann::json::object());

}  // namespace zl
