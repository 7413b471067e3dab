// poll_until (see Note [Polling back-off] in poll.h).
#include "runtime/poll.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "kernels/errors.h"

namespace zl {

void poll_until(const std::function<bool()>& is_done, double timeout_s,
                const std::function<std::string()>& on_timeout) {
  constexpr std::chrono::microseconds kSpin{20};
  constexpr std::chrono::microseconds kFirstSleep{10};
  constexpr std::chrono::microseconds kLongestSleep{200};
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < kSpin) {
    if (is_done()) return;
  }
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  std::chrono::microseconds sleep = kFirstSleep;
  while (!is_done()) {
    if (std::chrono::steady_clock::now() > deadline) throw RuntimeFailure(on_timeout());
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, kLongestSleep);
  }
}

}  // namespace zl
