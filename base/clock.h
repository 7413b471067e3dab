// The monotonic clock zerolap times everything with, and elapsed seconds since a time point.
#pragma once

#include <chrono>

namespace zl {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace zl
