// Test hook for the deadline tests, never set in production: ZEROLAP_FAULT_STOP = "<point>:<rank>"
// makes that rank stop itself with SIGSTOP when it reaches the named point, as a process that
// hangs or is descheduled would; its peers must then end the job within runtime.timeout_s.
// Points: "startup" (before the first exchange of `zerolap train`), "checkpoint" (inside a
// checkpoint write, after its communicator exists), "evaluation" (before evaluation's reduction).
#pragma once

namespace zl {

inline constexpr const char* kFaultStopEnvVar = "ZEROLAP_FAULT_STOP";

// Stops the calling process when ZEROLAP_FAULT_STOP names `point` and `rank`; returns otherwise.
void fault_stop_point(const char* point, int rank);

}  // namespace zl
