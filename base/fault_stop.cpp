// The fault test hooks: SIGSTOP and a non-finite input (see fault_stop.h).
#include "base/fault_stop.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace zl {

void fault_stop_point(const char* point, int rank) {
  const char* value = std::getenv(kFaultStopEnvVar);
  if (value == nullptr) return;
  if (std::string(value) != std::string(point) + ":" + std::to_string(rank)) return;
  std::fprintf(stderr, "zerolap: %s=%s: rank %d stops itself\n", kFaultStopEnvVar, value, rank);
  std::fflush(stderr);
  std::raise(SIGSTOP);
}

bool fault_nonfinite_input(std::int64_t step, int rank) {
  const char* value = std::getenv(kFaultNonfiniteEnvVar);
  return value != nullptr && std::string(value) == std::to_string(step) + ":" + std::to_string(rank);
}

}  // namespace zl
