// Comm thread scheduling (runtime/comm/thread_priority.h): SCHED_FIFO where this process may use it,
// the priority and warning a config gets, and the 1 us timer slack. Whether SCHED_FIFO is
// permitted depends on the machine (CAP_SYS_NICE or `ulimit -r`), so each check covers both.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

#include <thread>

#include "runtime/comm/thread_priority.h"
#include "runtime/config/config.h"

using namespace zl;

namespace {
int current_policy() {
  int policy = -1;
  sched_param param{};
  pthread_getschedparam(pthread_self(), &policy, &param);
  return policy;
}
}  // namespace

TEST_CASE("make_current_thread_realtime gives SCHED_FIFO exactly when it is permitted",
          "[thread_priority]") {
  const std::string refusal = realtime_refusal();
  const int before = current_policy();
  std::string result;
  int policy = -1;
  std::thread([&] {
    result = make_current_thread_realtime();
    policy = current_policy();
  }).join();
  CHECK(result == refusal);
  CHECK(policy == (refusal.empty() ? SCHED_FIFO : before));
  CHECK(current_policy() == before);  // only that thread changed
}

TEST_CASE("comm_priority in effect and its warning", "[thread_priority]") {
  const bool permitted = realtime_refusal().empty();
  RuntimeConfig normal;
  CHECK(comm_priority_in_effect(normal.comm_priority, DeviceKind::Cpu) == CommPriority::Normal);
  CHECK(comm_priority_warning(normal.comm_priority, DeviceKind::Cpu).empty());
  RuntimeConfig realtime;
  realtime.comm_priority = CommPriority::Realtime;
  CHECK(comm_priority_in_effect(realtime.comm_priority, DeviceKind::Cpu) ==
        (permitted ? CommPriority::Realtime : CommPriority::Normal));
  CHECK(comm_priority_warning(realtime.comm_priority, DeviceKind::Cpu).empty() == permitted);
  if (!permitted) {
    CHECK_THAT(comm_priority_warning(realtime.comm_priority, DeviceKind::Cpu),
               Catch::Contains("runtime.comm_priority = \"realtime\" not applied") &&
                   Catch::Contains("CAP_SYS_NICE"));
  }
  // NCCL communicators have no comm threads to raise: nothing to apply, nothing to warn about.
  CHECK(comm_priority_in_effect(realtime.comm_priority, DeviceKind::Cuda) == CommPriority::Normal);
  CHECK(comm_priority_warning(realtime.comm_priority, DeviceKind::Cuda).empty());
}

TEST_CASE("tighten_timer_slack sets a 1 us slack on the calling thread only",
          "[thread_priority]") {
  const int before = prctl(PR_GET_TIMERSLACK);
  int slack = -1;
  std::thread([&] {
    tighten_timer_slack();
    slack = prctl(PR_GET_TIMERSLACK);
  }).join();
  CHECK(slack == 1000);
  CHECK(prctl(PR_GET_TIMERSLACK) == before);
}
