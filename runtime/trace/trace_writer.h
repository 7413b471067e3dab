// Writing a run's trace: every rank's Tracer events gathered to rank 0 into one Chrome trace-event
// file ({"traceEvents": [...]}, opens in Perfetto / chrome://tracing), one process per rank, one
// thread per stream. Each rank's timestamps are shifted onto rank 0's clock by an offset measured
// with ping-pongs (estimate_clock_offset), which also holds across nodes.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/tracer.h"
#include "runtime/comm/timed_mpi.h"
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

// How far this rank's clock is behind rank 0's: rank 0's clock at an instant is this rank's plus
// offset_us. The true offset lies within round_trip_us / 2 of it while both clocks run at the same
// rate (steady_clock on one host; across hosts they drift apart by parts per million, so events
// long before the exchange are placed less exactly). Rank 0: {0, 0}.
struct ClockOffset {
  double offset_us = 0.0;
  double round_trip_us = 0.0;
};

// Collective. Each rank's offset of `clock` (its now_us()) to rank 0's, by Cristian's algorithm:
// rank r notes t0, rank 0 replies with its clock T, r notes t1; T was read between t0 and t1, so
// T - (t0 + t1) / 2 is off by at most (t1 - t0) / 2, and the round with the shortest t1 - t0 is
// kept: a preemption or a late poll (Note [Polling back-off]) only lengthens a round. Every
// Tracer counts from its own origin, so ranks on one host need this too. Ranks take their
// `rounds` (at least 1) one after another: (size - 1) * rounds round trips in all, a few
// microseconds each on one node, so a fraction of a second at hundreds of ranks.
ClockOffset estimate_clock_offset(const World& world, const Tracer& clock, const WaitLimit& limit,
                                  int rounds = 32);

// Collective. `events` is this rank's array on the clock of `clock` (its now_us()). Rank 0 writes
// `path` (creating its directory) whole or not at all (replace_whole_file); `metadata` goes to
// the file's "otherData" (e.g. the simulated link label), with "clock_round_trip_us" added: each
// rank's ClockOffset::round_trip_us, half of which bounds the error of its events' placement
// against rank 0's. Every wait for another rank is bounded by `timeout_s` (runtime.timeout_s; a
// stopped peer: RuntimeFailure naming the rank and the step). Throws UserError when the file
// cannot be written.
void write_trace(const World& world, const Tracer& clock, nlohmann::json events,
                 const std::string& path, double timeout_s,
                 const nlohmann::json& metadata = nlohmann::json::object());

}  // namespace zl
