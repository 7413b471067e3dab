// CpuStream (runtime/comm/cpu_stream.h): FIFO order, completions, poisoning, and tasks enqueued
// from several threads at once. Also the ThreadSanitizer test of the comm-thread machinery
// (ctest label `tsan`, scripts/test_sanitizers.sh).
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/comm/cpu_stream.h"

TEST_CASE("tasks run in FIFO order on one thread; a completion covers earlier tasks",
          "[cpu_stream]") {
  zl::CpuStream stream;
  std::vector<int> order;  // touched only by the stream thread until synchronize()
  std::vector<std::shared_ptr<zl::Completion>> done;
  for (int i = 0; i < 100; ++i) {
    done.push_back(stream.enqueue([&order, &stream, i] {
      if (!stream.on_stream_thread()) throw std::logic_error("task off the stream thread");
      order.push_back(i);
    }));
  }
  done[99]->wait();
  for (const auto& d : done) CHECK(d->is_done());
  REQUIRE(order.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(order[i] == i);
  CHECK_FALSE(stream.on_stream_thread());
}

TEST_CASE("a throwing task poisons the stream: it and every later task fail", "[cpu_stream]") {
  zl::CpuStream stream;
  std::atomic<int> ran{0};
  auto ok = stream.enqueue([&] { ++ran; });
  auto bad = stream.enqueue([] { throw std::runtime_error("collective failed"); });
  auto later = stream.enqueue([&] { ++ran; });
  ok->wait();
  CHECK_THROWS_WITH(bad->wait(), "collective failed");
  CHECK_THROWS_WITH(later->wait(), "collective failed");
  CHECK_THROWS_WITH(stream.synchronize(), "collective failed");
  CHECK(ran == 1);
}

TEST_CASE("threads enqueue and wait concurrently; the destructor drains the queue",
          "[cpu_stream]") {
  constexpr int kThreads = 4, kTasks = 200;
  std::vector<int> counts(kThreads, 0);  // each written only by stream tasks, read after join
  {
    zl::CpuStream stream;
    std::vector<std::thread> producers;
    for (int t = 0; t < kThreads; ++t) {
      producers.emplace_back([&, t] {
        for (int i = 0; i < kTasks; ++i) {
          auto done = stream.enqueue([&counts, t] { ++counts[t]; });
          if (i % 50 == 0) done->wait();
        }
      });
    }
    for (auto& p : producers) p.join();
  }  // ~CpuStream runs what is still queued
  for (int t = 0; t < kThreads; ++t) CHECK(counts[t] == kTasks);
}
