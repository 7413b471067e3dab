// poll_until: the one way zerolap waits on the host for something that may never happen (an MPI
// request, a CUDA event): poll with a back-off and turn a wait longer than the timeout into an
// error instead of a hang.
//
// Note [Polling back-off]: poll without pause for the first 20 us, then sleep, the sleeps
// doubling from 10 us up to 200 us; never sched_yield. Small collectives complete within
// microseconds on shared memory, and a sleep would add a wake-up to each: 2-rank training of
// configs/spirals.toml (800 steps of tiny buckets) took 0.17 s with sleeps alone, 0.03 s with the
// spin first. A thread that yields in a loop, on the other hand, keeps competing for the core a
// compute thread needs when ranks fill every core (2 ranks on 2 cores), and the kernel may give
// the core away for a whole time slice at each yield. Measured with `mpirun -np 2 zerolap bench
// configs/bench_overlap.toml --set link.bandwidth_gbps=10` on a 2-core machine: 64 yields then 5
// us sleeps left 26-28% of the communication of zero/interleaved/allreduce_broadcast hidden,
// sleeps capped at 100-300 us 47-53%. A completion is noticed at most ~200 us late, plus the
// thread's timer slack: 1 us on the MPI comm threads (thread_priority.h), Linux's default 50 us
// on a main thread waiting for a CUDA event. That is small against the milliseconds a bucket
// collective takes when it is worth overlapping.
#pragma once

#include <functional>
#include <string>

namespace zl {

// Calls is_done() until it returns true (back-off above); after timeout_s seconds throws
// RuntimeFailure(on_timeout()). Exceptions from is_done() propagate.
void poll_until(const std::function<bool()>& is_done, double timeout_s,
                const std::function<std::string()>& on_timeout);

}  // namespace zl
