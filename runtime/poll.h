// poll_until: the one way zerolap waits on the host for something that may never happen (an MPI
// request, a CUDA event): poll with a back-off and turn a wait longer than the timeout into an
// error instead of a hang.
//
// Note [Polling back-off]: the first check is immediate, then sleeps double from 10 us up to
// 200 us. No spinning and no sched_yield: on a node with fewer cores than busy threads (2 ranks'
// main threads on 2 cores) a thread that yields in a loop keeps competing for the core the
// compute thread needs, and a comm thread that polls every few microseconds pays a wake-up each
// time. Measured on a 2-core machine with `mpirun -np 2 zerolap bench configs/bench_overlap.toml
// --set link.bandwidth_gbps=10`: 64 yields then 5 us sleeps left 26-28% of the all-reduce
// communication of zero/interleaved/allreduce_broadcast hidden, sleeps capped at 100-300 us
// 47-53%. A completion is noticed at most ~200 us (plus timer slack) late, small against the
// milliseconds a bucket collective takes when it is worth overlapping.
#pragma once

#include <functional>
#include <string>

namespace zl {

// Calls is_done() until it returns true (back-off above); after timeout_s seconds throws
// RuntimeFailure(on_timeout()). Exceptions from is_done() propagate.
void poll_until(const std::function<bool()>& is_done, double timeout_s,
                const std::function<std::string()>& on_timeout);

}  // namespace zl
