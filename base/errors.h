// Error types shared by every layer of zerolap, and the check macros that raise them.
// UserError: bad input (CLI, config, data or checkpoint files) -> exit code 2; its message says
// what and where. RuntimeFailure: a failure while running (MPI, CUDA, a timeout) -> exit code 1.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace zl {

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RuntimeFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Internal invariant violated: a bug in zerolap, not in the user's input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// A CUDA kernel was asked for in a build without CUDA (the runtime normally rejects
// runtime.device = "cuda" before any kernel runs; this guards direct callers).
[[noreturn]] inline void throw_built_without_cuda(const char* kernel) {
  throw UserError(fmt::format(
      "{}: runtime.device = \"cuda\", but zerolap was built without CUDA; use device = \"cpu\" or "
      "rebuild with -DZEROLAP_CUDA=ON (needs nvcc and NCCL)",
      kernel));
}

}  // namespace zl

// ZL_CHECK(cond, fmt, args...): an internal invariant; throws InternalError with file:line.
#define ZL_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      throw ::zl::InternalError(fmt::format("{}:{}: check failed: {}: {}", __FILE__, __LINE__, \
                                            #cond, fmt::format(__VA_ARGS__)));               \
    }                                                                                        \
  } while (0)
