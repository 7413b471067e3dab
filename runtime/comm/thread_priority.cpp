// Comm thread scheduling: SCHED_FIFO and timer slack (see Note [Comm thread priority] in
// thread_priority.h).
#include "runtime/comm/thread_priority.h"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

#include <cerrno>
#include <system_error>
#include <thread>

#include <fmt/format.h>

namespace zl {

std::string make_current_thread_realtime() {
  sched_param param{};
  param.sched_priority = sched_get_priority_min(SCHED_FIFO);
  const int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
  if (rc == 0) return {};
  if (rc == EPERM) return "SCHED_FIFO is not permitted (it needs CAP_SYS_NICE or `ulimit -r` >= 1)";
  return fmt::format("pthread_setschedparam(SCHED_FIFO) failed: {}",
                     std::generic_category().message(rc));
}

std::string realtime_refusal() {
  std::string refusal;
  std::thread([&] { refusal = make_current_thread_realtime(); }).join();
  return refusal;
}

CommPriority comm_priority_in_effect(CommPriority requested, DeviceKind device) {
  const bool realtime = requested == CommPriority::Realtime &&
                        device == DeviceKind::Cpu && realtime_refusal().empty();
  return realtime ? CommPriority::Realtime : CommPriority::Normal;
}

std::string comm_priority_warning(CommPriority requested, DeviceKind device) {
  if (requested != CommPriority::Realtime || device != DeviceKind::Cpu) return {};
  const std::string refusal = realtime_refusal();
  if (refusal.empty()) return {};
  return fmt::format(
      "zerolap: warning: runtime.comm_priority = \"realtime\" not applied: {}; the comm threads "
      "run at normal priority",
      refusal);
}

void tighten_timer_slack() {
  constexpr unsigned long kSlackNs = 1000;
  prctl(PR_SET_TIMERSLACK, kSlackNs);  // best effort: the default slack only costs latency
}

}  // namespace zl
