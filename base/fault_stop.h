// Test hook for the deadline tests, never set in production: ZEROLAP_FAULT_STOP = "<point>:<rank>"
// makes that rank stop itself with SIGSTOP when it reaches the named point, as a process that
// hangs or is descheduled would; its peers must then end the job within runtime.timeout_s.
// Points: "mpi_init" (just before MPI_Init, the rank taken from the launcher's environment),
// "startup" (before the first exchange of `zerolap train`), "checkpoint" (inside a
// checkpoint write, after its communicator exists), "evaluation" (before evaluation's reduction),
// "trace" (before the trace of `zerolap train` is gathered), "consolidate" (rank 0 of `zerolap
// consolidate`, its output's data written to the temporary file, before that file is finished),
// "bench_outputs" (rank 0 of `zerolap bench`, its results written, before the ranks' last barrier).
//
// Test hook for the non-finite tests, never set in production: ZEROLAP_FAULT_NONFINITE =
// "<step>:<rank>" makes that rank's input of that optimizer step (counted from 1) hold a NaN, as a
// corrupt sample would: its loss and gradients turn non-finite on that rank only.
#pragma once

#include <cstdint>

namespace zl {

inline constexpr const char* kFaultStopEnvVar = "ZEROLAP_FAULT_STOP";
inline constexpr const char* kFaultNonfiniteEnvVar = "ZEROLAP_FAULT_NONFINITE";

// Stops the calling process when ZEROLAP_FAULT_STOP names `point` and `rank`; returns otherwise.
void fault_stop_point(const char* point, int rank);

// True when ZEROLAP_FAULT_NONFINITE names `step` and `rank`.
bool fault_nonfinite_input(std::int64_t step, int rank);

}  // namespace zl
