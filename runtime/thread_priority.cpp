// make_current_thread_realtime (see Note [Comm thread priority] in thread_priority.h).
#include "runtime/thread_priority.h"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace zl {

std::string make_current_thread_realtime() {
  sched_param param{};
  param.sched_priority = sched_get_priority_min(SCHED_FIFO);
  const int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
  if (rc == 0) return {};
  if (rc == EPERM) {
    return "SCHED_FIFO is not permitted here (it needs CAP_SYS_NICE, e.g. root, or `ulimit -r` >= 1)";
  }
  return fmt::format("pthread_setschedparam(SCHED_FIFO) failed: {}", std::strerror(rc));
}

bool realtime_permitted() {
  bool permitted = false;
  std::thread([&] { permitted = make_current_thread_realtime().empty(); }).join();
  return permitted;
}

void tighten_timer_slack() {
  constexpr unsigned long kSlackNs = 1000;
  prctl(PR_SET_TIMERSLACK, kSlackNs);  // best effort: the default slack only costs latency
}

}  // namespace zl
