// poll_until (see Note [Polling back-off] in poll.h).
#include "base/poll.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/errors.h"

namespace zl {

void poll_until(const std::function<bool()>& is_done, double timeout_s,
                const std::function<std::string()>& on_timeout) {
  using std::chrono::microseconds;
  constexpr microseconds kSpin{20};
  constexpr microseconds kShortestSleep{10};
  constexpr microseconds kLongestSleep{200};
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < kSpin) {
    if (is_done()) return;
  }
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  while (!is_done()) {
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) throw RuntimeFailure(on_timeout());
    // An eighth of the time waited so far: a completion is noticed at most ~12% late.
    const auto waited = std::chrono::duration_cast<microseconds>(now - start);
    std::this_thread::sleep_for(std::clamp(waited / 8, kShortestSleep, kLongestSleep));
  }
}

}  // namespace zl
