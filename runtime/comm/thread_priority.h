// Scheduling of the CPU comm threads: their priority (runtime.comm_priority) and timer slack.
//
// Note [Comm thread priority]: a comm thread needs the CPU in short stretches (notice a peer's
// message, copy or sum a bucket, issue the next collective), but it needs it *promptly*: each step
// of a collective waits for it. When the ranks' compute threads keep every core busy (2 ranks on 2
// cores), the kernel's fair scheduler lets the running GEMM finish its time slice first, and the
// collectives of interleaved fall behind backward (docs/bench.md, "What it took to hide
// communication on 2 cores"). `comm_priority = "realtime"` puts the MPI comm threads under
// SCHED_FIFO at the lowest real-time priority: they preempt compute at once, so a collective
// advances as soon as its data can move. What runs on those threads runs at that priority too: in
// interleaved mode that includes the optimizer step of each owned bucket (a collective's
// continuation), the same work, done sooner. The threads never stay
// on the CPU waiting: a wait spins for at most 20 us, then sleeps (Note [Polling back-off]), and
// the kernel's real-time throttling (sched_rt_runtime_us, 95% by default) bounds what a
// misbehaving real-time thread could take. SCHED_FIFO needs CAP_SYS_NICE or `ulimit -r` >= 1 (root
// has the capability outside containers; many containers drop it); without it the threads stay
// normal and rank 0 says so once (comm_priority_warning). NCCL communicators have no such threads.
// On a node with a spare core per rank it changes little.
#pragma once

#include <string>

#include "base/exec_context.h"
#include "runtime/comm/comm_options.h"

namespace zl {

// Moves the calling thread to SCHED_FIFO priority 1. Returns "" on success, else why not.
std::string make_current_thread_realtime();

// "" when this process may use SCHED_FIFO, else why not (tried on a throwaway thread).
std::string realtime_refusal();

// The priority the MPI comm threads of a run on `device` get when `requested`
// (runtime.comm_priority): realtime only where it was asked for, is permitted, and the
// communicators are MPI ones.
CommPriority comm_priority_in_effect(CommPriority requested, DeviceKind device);

// The warning rank 0 prints when realtime was asked for on the CPU but is refused; "" otherwise.
std::string comm_priority_warning(CommPriority requested, DeviceKind device);

// Lets the calling thread's sleeps overshoot by ~1 us instead of Linux's default 50 us timer
// slack, so the polling back-off of a comm thread (Note [Polling back-off]) sleeps as long as it
// asks. Real-time threads have no slack anyway. Best effort.
void tighten_timer_slack();

}  // namespace zl
