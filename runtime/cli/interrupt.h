// Ctrl-C and SIGTERM during `zerolap train` and `bench` (docs/reliability.md, "Ctrl-C and
// SIGTERM"): the first signal asks every rank to stop at the same step, the second ends the
// process at once; during `consolidate`, the first removes the partial output and ends it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <string>

#include "runtime/comm/world.h"

namespace zl {

// While alive: SIGINT and SIGTERM set this process's stop request instead of ending it (and, when
// `first_note` is set, write `zerolap: SIGINT: <first_note> (again to end now)`, or SIGTERM, for a
// stop that may take long to come); a second one writes `zerolap: interrupted again: ending now,
// <ending_note>` and ends the process at once (_exit(128 + signal)). Both notes must outlive the
// handlers (literals).
// The previous handlers come back at destruction.
class InterruptHandlers {
 public:
  InterruptHandlers(const char* first_note, const char* ending_note);
  ~InterruptHandlers();
  // The notes from now on (a later phase, such as writing the outputs, that a signal lets end).
  void set_notes(const char* first_note, const char* ending_note);
  // Writes the first note now for a signal received before it was set (a phase that answered
  // none), unless a note was written for that signal already.
  void say_pending_note() const;
  InterruptHandlers(const InterruptHandlers&) = delete;
  InterruptHandlers& operator=(const InterruptHandlers&) = delete;
};

// For a command whose one effect is a file written to a temporary one and renamed into place
// (`zerolap consolidate`): while alive, SIGINT and SIGTERM remove `partial` and end the process at
// once, exit 128 + signal, saying `zerolap: SIGINT: <message>` (and "(its partial file removed)"
// when there was one to remove). Such a command has no step to finish and nothing to save, so the
// first signal ends it; the default action ended it too, but left the temporary file (as large as
// the output) where nothing removes it. A signal after the rename finds no `partial`: the output
// stays, complete. The previous handlers come back at destruction.
class RemoveOnInterrupt {
 public:
  RemoveOnInterrupt(std::string partial, std::string message);
  ~RemoveOnInterrupt();
  RemoveOnInterrupt(const RemoveOnInterrupt&) = delete;
  RemoveOnInterrupt& operator=(const RemoveOnInterrupt&) = delete;

 private:
  std::string partial_, message_;  // read by the handler: kept unchanged while it is installed
};

// The exit code of a run stopped by `signal`: 130 for SIGINT, 143 for SIGTERM (128 + signal).
inline int interrupt_exit_code(int signal) { return 128 + signal; }

// Collective and blocking: the signal any rank has received (the maximum over ranks), 0 when
// none. For loops whose iterations take seconds (the bench's runs), where one wait each costs
// nothing and the loop stops right after the iteration the signal arrived in.
int agree_on_signal(const World& world, double timeout_s);

// Note [Stop agreement]: the ranks agree on the step to stop at with one nonblocking 1-int
// all-reduce (MAX of the signal) per step on a communicator of its own, started after step s and
// completed after step s + 1, so it overlaps a whole step and no step waits for it. A signal seen
// by any rank during step s stops every rank after step s + 1 (the same step everywhere); the
// price is one more step after the signal, and one tiny collective per step.
class StopAgreement {
 public:
  StopAgreement(const World& world, double timeout_s);
  ~StopAgreement();
  StopAgreement(const StopAgreement&) = delete;
  StopAgreement& operator=(const StopAgreement&) = delete;

  // Collective, after each step: the signal every rank agrees to stop for (0: go on). The same
  // value on every rank after the same step.
  int after_step();

 private:
  World world_;
  double timeout_s_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int sent_ = 0, agreed_ = 0;
  int uncaught_at_start_ = std::uncaught_exceptions();  // > at destruction: unwinding
};

// Rank 0's line for a run stopped by `signal` after `step`: `interrupted at step N; checkpoint
// <path>; resume with --set checkpoint.resume=true` (`checkpoint` empty: no checkpoint.dir).
void report_interrupt(const World& world, int signal, std::int64_t step,
                      const std::string& checkpoint);

}  // namespace zl
