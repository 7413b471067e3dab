// InterruptHandlers, RemoveOnInterrupt, agree_on_signal and StopAgreement (see interrupt.h).
#include "runtime/cli/interrupt.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "base/clock.h"
#include "runtime/comm/timed_mpi.h"

namespace zl {
namespace {

std::atomic<int> g_signal{0};  // the signal this process received (SIGINT, SIGTERM), 0: none
struct sigaction g_previous_int, g_previous_term;
// InterruptHandlers' notes; atomic, as set_notes may change them while a signal arrives.
std::atomic<const char*> g_first_note{nullptr};
std::atomic<const char*> g_ending_note{""};
std::atomic<bool> g_first_said{false};  // a first note was written for the signal received

// Only async-signal-safe calls here: write(2) of whole strings.
void say(const char* text) {
  [[maybe_unused]] const ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
}

// "zerolap: SIGINT: <first note> (again to end now)", once per signal received.
void say_first_note(int signal) {
  const char* note = g_first_note.load();
  if (note == nullptr || g_first_said.exchange(true)) return;
  say(signal == SIGINT ? "\nzerolap: SIGINT: " : "\nzerolap: SIGTERM: ");
  say(note);
  say(" (again to end now)\n");
}

void on_signal(int signal) {
  int none = 0;
  if (g_signal.compare_exchange_strong(none, signal)) {  // the first: stop where the loop can
    say_first_note(signal);
    return;
  }
  // The second: at once, as the user asked twice.
  say("\nzerolap: interrupted again: ending now, ");
  say(g_ending_note.load());
  say("\n");
  _exit(interrupt_exit_code(signal));
}

// RemoveOnInterrupt's file and line; the strings they point into outlive the handler.
std::atomic<const char*> g_remove_path{nullptr};
std::atomic<const char*> g_remove_message{""};
struct sigaction g_remove_previous_int, g_remove_previous_term;

void remove_and_exit(int signal) {
  const char* path = g_remove_path.load();
  const bool removed = path != nullptr && ::unlink(path) == 0;
  say(signal == SIGINT ? "\nzerolap: SIGINT: " : "\nzerolap: SIGTERM: ");
  say(g_remove_message.load());
  // No temporary file: not begun (the output untouched), or renamed into place (complete).
  say(removed ? " (its partial file removed)\n" : "\n");
  _exit(interrupt_exit_code(signal));
}

}  // namespace

RemoveOnInterrupt::RemoveOnInterrupt(std::string partial, std::string message)
    : partial_(std::move(partial)), message_(std::move(message)) {
  g_remove_path = partial_.c_str();
  g_remove_message = message_.c_str();
  struct sigaction action = {};
  action.sa_handler = remove_and_exit;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGINT);  // one handler at a time: both signals end the process
  sigaddset(&action.sa_mask, SIGTERM);
  sigaction(SIGINT, &action, &g_remove_previous_int);
  sigaction(SIGTERM, &action, &g_remove_previous_term);
}

RemoveOnInterrupt::~RemoveOnInterrupt() {
  sigaction(SIGINT, &g_remove_previous_int, nullptr);
  sigaction(SIGTERM, &g_remove_previous_term, nullptr);
  g_remove_path = nullptr;
  g_remove_message = "";
}

InterruptHandlers::InterruptHandlers(const char* first_note, const char* ending_note) {
  g_first_note = first_note;
  g_ending_note = ending_note;
  g_signal.store(0);
  g_first_said.store(false);
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a read or wait in progress goes on; the loop checks the flag
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

void InterruptHandlers::set_notes(const char* first_note, const char* ending_note) {
  g_first_note = first_note;
  g_ending_note = ending_note;
}

void InterruptHandlers::say_pending_note() const {
  if (const int signal = g_signal.load(); signal != 0) say_first_note(signal);
}

InterruptHandlers::~InterruptHandlers() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

void report_interrupt(const World& world, int signal, std::int64_t step,
                      const std::string& checkpoint) {
  if (!world.is_root()) return;
  const char* name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
  // On stdout, the stream of the checkpoint's own line: mpirun forwards each stream on its own,
  // so a line on stderr could come out before the lines printed before it. On one stream this is
  // the job's last line, also where the launcher's exit code hides the signal (1 after a signal
  // to mpirun): the step and how to resume are there.
  fmt::print("zerolap: {}: interrupted at step {}; {}\n", name, step,
             checkpoint.empty() ? "no checkpoint (checkpoint.dir is not set)"
                                : fmt::format("checkpoint {}; resume with --set "
                                              "checkpoint.resume=true", checkpoint));
  std::fflush(stdout);
}

int agree_on_signal(const World& world, double timeout_s) {
  const int mine = g_signal.load();
  if (world.size == 1) return mine;
  int agreed = 0;
  timed_allreduce(&mine, &agreed, 1, MPI_INT, MPI_MAX, world.comm, WaitLimit{world.rank, timeout_s},
                  "agreeing on whether to stop (SIGINT / SIGTERM)");
  return agreed;
}

StopAgreement::StopAgreement(const World& world, double timeout_s)
    : world_(world), timeout_s_(timeout_s) {
  if (world_.size > 1) {
    comm_ = timed_comm_dup(world_.comm, WaitLimit{world_.rank, timeout_s_},
                           "creating the stop-agreement communicator");
  }
}

StopAgreement::~StopAgreement() {
  // Unwinding (a step timed out, a peer died): the pending all-reduce may never be matched and
  // the job is ending (MPI_Abort), so leave it; an MPI_Wait here held the rank past
  // runtime.timeout_s. Otherwise every rank stopped after the same step and the request is
  // matched: complete it, within the deadline too, so the communicator can go. Never throws.
  if (std::uncaught_exceptions() > uncaught_at_start_) return;
  if (request_ != MPI_REQUEST_NULL) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    int done = 0;
    while (MPI_Test(&request_, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
      if (Clock::now() > deadline) return;  // not matched: leave the request and communicator
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

int StopAgreement::after_step() {
  if (world_.size == 1) return g_signal.load();
  if (request_ != MPI_REQUEST_NULL) {
    wait_with_deadline(request_, WaitLimit{world_.rank, timeout_s_},
                       "agreeing on whether to stop (SIGINT / SIGTERM)");
    if (agreed_ != 0) return agreed_;  // every rank saw the same result of the same all-reduce
  }
  sent_ = g_signal.load();
  MPI_Iallreduce(&sent_, &agreed_, 1, MPI_INT, MPI_MAX, comm_, &request_);
  return 0;
}

}  // namespace zl
