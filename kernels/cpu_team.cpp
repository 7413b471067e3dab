// set_cpu_team_limit and cpu_team_threads (see cpu_team.h).
#include "kernels/cpu_team.h"

#include <algorithm>
#include <atomic>

namespace zl {
namespace {

// Relaxed: a kernel that reads the old limit runs on the old team, which gives the same bits.
std::atomic<int> g_limit{0};

}  // namespace

void set_cpu_team_limit(int limit) { g_limit.store(std::max(limit, 0), std::memory_order_relaxed); }

int cpu_team_limit() { return g_limit.load(std::memory_order_relaxed); }

int cpu_team_threads(int threads) {
  const int limit = cpu_team_limit();
  return std::max(1, limit > 0 ? std::min(threads, limit) : threads);
}

}  // namespace zl
