// poll_until: the one way zerolap waits on the host for something that may never happen (an MPI
// request, a CUDA event): poll with a back-off and turn a wait longer than the timeout into an
// error instead of a hang. It is in kernels/ because the CUDA reductions that return a value to
// the host wait this way too (elementwise_reductions.cu); the communicators in runtime/ use it for
// their requests and events.
//
// Note [Polling back-off]: poll without pause for the first 20 us, then sleep an eighth of the
// time waited so far (at least 10 us, at most 200 us); never sched_yield.
// - Small collectives complete within microseconds on shared memory; a sleep would add a wake-up
//   to each. 2-rank training of configs/spirals.toml (800 steps of tiny buckets) took 0.17 s with
//   sleeps alone, 0.03 s with the spin first.
// - Sleeping in proportion to the wait keeps a completion from being noticed more than ~12% late,
//   plus the thread's timer slack: 1 us on the MPI comm threads (runtime/comm/thread_priority.h),
//   Linux's default 50 us on a main thread waiting for a CUDA event. Sleeps that doubled from 10 us made a
//   100 us collective wait ~170 us: interleaved Fashion-MNIST on 2 ranks trained in 2.66 s against
//   2.24 s now.
// - A thread that yields in a loop keeps competing for the core a compute thread needs when ranks
//   fill every core (2 ranks on 2 cores), and the kernel may give the core away for a whole time
//   slice at each yield. Measured with `mpirun -np 2 zerolap bench configs/bench_overlap.toml --set
//   link.bandwidth_gbps=10` on a 2-core machine: 64 yields then 5 us sleeps left 26-28% of the
//   communication of zero/interleaved/allreduce_broadcast hidden, sleeps of 100-300 us 47-53%.
#pragma once

#include <functional>
#include <string>

namespace zl {

// Calls is_done() until it returns true (back-off above); after timeout_s seconds throws
// RuntimeFailure(on_timeout()). Exceptions from is_done() propagate.
void poll_until(const std::function<bool()>& is_done, double timeout_s,
                const std::function<std::string()>& on_timeout);

}  // namespace zl
