// Scheduling of the CPU comm threads: their timer slack, and their priority
// (runtime.comm_priority).
//
// Note [Comm thread priority]: a comm thread needs the CPU for microseconds at a time (notice a
// peer's message, copy or sum a bucket, issue the next collective) but needs it *promptly*: each
// step of a collective waits for it. When the ranks' compute threads keep every core busy (2 ranks
// on 2 cores), the kernel's fair scheduler lets the running GEMM finish its time slice first, and
// a 2 MiB bucket reduce that takes 0.8 ms on an idle node took 3-5 ms during backward, so the
// collectives of interleaved fell behind backward. `comm_priority = "realtime"` puts the comm
// threads under SCHED_FIFO at the lowest real-time priority: they preempt compute at once, do their
// short work and sleep again (they never spin: Note [Polling back-off] in poll.h), and the
// collectives then ran at the modelled link time. It needs CAP_SYS_NICE (root) or `ulimit -r` >= 1;
// without either the threads stay normal and rank 0 says so once. On a node with a spare core per
// rank it changes little. The kernel's real-time throttling (sched_rt_runtime_us, 95% by default)
// bounds what a misbehaving real-time thread could take.
#pragma once

#include <string>

namespace zl {

// Moves the calling thread to SCHED_FIFO priority 1. Returns "" on success, else why not.
std::string make_current_thread_realtime();

// Whether this process may do that (tried on a throwaway thread).
bool realtime_permitted();

// Lets the calling thread's sleeps overshoot by ~1 us instead of Linux's default 50 us timer
// slack, so the polling back-off of a comm thread (Note [Polling back-off]) sleeps as long as it
// asks. Real-time threads have no slack anyway. A no-op where prctl is unavailable.
void tighten_timer_slack();

}  // namespace zl
