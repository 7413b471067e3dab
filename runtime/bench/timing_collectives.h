// The collectives around the bench's timed runs (the modes' and the limits'): a barrier that
// starts a run at the same instant on every rank, and the max over ranks of what each timed.
// Every wait for another rank is bounded by runtime.timeout_s (runtime/comm/timed_mpi.h).
#pragma once

#include <span>

#include "runtime/comm/timed_mpi.h"
#include "runtime/comm/world.h"

namespace zl {

// A barrier whose end is the same instant on every rank to within a few microseconds: the first,
// polled, waits for the slowest rank (an early rank may notice its end late: Note [Polling
// back-off]); all enter the second within that slack and leave it while still spinning.
void aligned_barrier(const World& world, const WaitLimit& limit);

// Element-wise max over ranks, in place.
void max_over_ranks(const World& world, const WaitLimit& limit, std::span<double> values);
double max_over_ranks(const World& world, const WaitLimit& limit, double value);

}  // namespace zl
