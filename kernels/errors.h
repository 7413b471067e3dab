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

}  // namespace zl

// ZL_CHECK(cond, fmt, args...): an internal invariant; throws InternalError with file:line.
#define ZL_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      throw ::zl::InternalError(fmt::format("{}:{}: check failed: {}: {}", __FILE__, __LINE__, \
                                            #cond, fmt::format(__VA_ARGS__)));               \
    }                                                                                        \
  } while (0)
