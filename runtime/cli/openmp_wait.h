// How the OpenMP threads of a zerolap process wait between parallel regions, and the re-exec that
// sets it before the OpenMP runtime starts (Note [OpenMP wait policy]).
#pragma once

namespace zl {

// The environment variable and value zerolap puts in place when the user has set neither
// OMP_WAIT_POLICY nor GOMP_SPINCOUNT.
inline constexpr const char* kOpenmpWaitVariable = "OMP_WAIT_POLICY";
inline constexpr const char* kOpenmpWaitValue = "passive";

// When the user has set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT: sets zerolap's wait policy and
// replaces the process image with itself (/proc/self/exe, the same argv and environment), so the
// OpenMP runtime reads the policy when it starts. Returns only when no exec is needed, or when the
// exec failed (the run then goes on with the OpenMP runtime's own default). Call it first in main,
// before MPI_Init and before any thread exists.
void exec_with_openmp_wait_policy(char** argv);

}  // namespace zl
