// poll_until: the one way zerolap waits on the host for something that may never happen (an MPI
// request, a CUDA event): poll with a back-off and turn a wait longer than the timeout into an
// error instead of a hang. It is in kernels/ because the CUDA reductions that return a value to
// the host wait this way too (elementwise_reductions.cu); the communicators in runtime/ use it for
// their requests and events.
//
// Note [Polling back-off]: poll without pause for the first 20 us, then sleep an eighth of the
// time waited so far (at least 10 us, at most 200 us); never sched_yield.
// - Small collectives complete within microseconds on shared memory; a sleep would add a wake-up
//   to each, so the spin comes first.
// - Sleeping in proportion to the wait keeps a completion from being noticed more than an eighth
//   of the wait late, plus the thread's timer slack: 1 us on the MPI comm threads
//   (runtime/comm/thread_priority.h), Linux's default 50 us on a main thread waiting for a CUDA
//   event. Sleeps that grow faster (doubling) overshoot short waits by most of their length.
// - A thread that yields in a loop keeps competing for the core a compute thread needs when ranks
//   fill every core (2 ranks on 2 cores), and the kernel may give the core away for a whole time
//   slice at each yield.
// The measurements behind each choice: docs/bench.md, "What it took to hide communication on 2
// cores".
#pragma once

#include <functional>
#include <string>

namespace zl {

// Calls is_done() until it returns true (back-off above); after timeout_s seconds throws
// RuntimeFailure(on_timeout()). Exceptions from is_done() propagate.
void poll_until(const std::function<bool()>& is_done, double timeout_s,
                const std::function<std::string()>& on_timeout);

}  // namespace zl
