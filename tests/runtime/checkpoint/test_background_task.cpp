// The background task of async checkpoints (runtime/checkpoint/background_task.h): it runs while
// the caller goes on, one at a time, at idle priority until hurried, and its failure reaches the
// caller's wait(), once.
#include <catch2/catch.hpp>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/errors.h"
#include "runtime/checkpoint/background_task.h"

using namespace zl;

TEST_CASE("a background task runs while the caller goes on, and wait() joins it",
          "[background-task]") {
  BackgroundTask task;
  CHECK_FALSE(task.running());
  task.wait();  // nothing to wait for
  std::atomic<bool> release{false};
  int result = 0;
  task.start([&] {
    while (!release.load()) std::this_thread::yield();
    result = 42;
  });
  CHECK(task.running());
  CHECK_FALSE(task.finished());  // it waits for the caller: the caller was not held by start()
  CHECK_THROWS_AS(task.start([] {}), InternalError);  // one at a time
  release = true;
  task.wait();
  CHECK_FALSE(task.running());
  CHECK(result == 42);
  // The next task may start once the previous one was waited for.
  task.start([&] { result = 7; });
  while (!task.finished()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  task.wait();
  CHECK(result == 7);
}

TEST_CASE("a background task's failure is rethrown by wait(), once", "[background-task]") {
  BackgroundTask task;
  task.start([] { throw RuntimeFailure("checkpoint shard 'x' of rank 1 could not be written"); });
  CHECK_THROWS_WITH(task.wait(), Catch::Contains("checkpoint shard 'x' of rank 1"));
  task.wait();  // reported once: nothing left to rethrow
  CHECK_FALSE(task.running());
}

TEST_CASE("a background task runs at idle priority until it is hurried", "[background-task]") {
  // Idle while training has the cores, normal priority once the next checkpoint draws near or
  // training waits for it (Note [Checkpoint writes use idle CPU] in background_task.h).
  BackgroundTask task;
  std::atomic<int> stage{0};
  std::atomic<int> policy_before{-1}, policy_after{-1};
  task.start([&] {
    while (stage.load() == 0) std::this_thread::yield();
    policy_before = sched_getscheduler(0);
    stage = 2;
    while (stage.load() == 2) std::this_thread::yield();
    policy_after = sched_getscheduler(0);
  });
  stage = 1;
  while (stage.load() != 2) std::this_thread::yield();
  task.hurry();
  task.hurry();  // once is enough; again is a no-op
  stage = 3;
  task.wait();
  CHECK(policy_before.load() == SCHED_IDLE);
  CHECK(policy_after.load() == SCHED_OTHER);
  task.hurry();  // none runs: a no-op
}
