// poll_until (base/poll.h): returns once the condition holds, turns a wait past the timeout
// into a RuntimeFailure with the caller's message, and lets the condition's own errors through.
#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>

#include "base/errors.h"
#include "base/poll.h"

using zl::poll_until;

namespace {
std::string never_called() { return "on_timeout must not be called"; }
}  // namespace

TEST_CASE("poll_until returns as soon as the condition holds", "[poll]") {
  int calls = 0;
  poll_until([&] { return ++calls == 1; }, 1.0, never_called);
  CHECK(calls == 1);

  // Past the spin and into the sleeps: done 5 ms from now.
  const auto ready_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(5);
  calls = 0;
  poll_until([&] { return ++calls, std::chrono::steady_clock::now() >= ready_at; }, 10.0,
             never_called);
  CHECK(std::chrono::steady_clock::now() >= ready_at);
  CHECK(calls > 1);
}

TEST_CASE("poll_until turns a wait past the timeout into a RuntimeFailure", "[poll]") {
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_AS(poll_until([] { return false; }, 0.02, [] { return std::string("late"); }),
                    zl::RuntimeFailure);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(waited >= 0.02);
  CHECK(waited < 5.0);  // the sleeps are capped, so it notices soon after the deadline
  REQUIRE_THROWS_WITH(poll_until([] { return false; }, 0.001, [] { return std::string("late"); }),
                      "late");
  // A timeout shorter than the spin still ends with the error, not a hang.
  REQUIRE_THROWS_AS(poll_until([] { return false; }, 1e-9, [] { return std::string("late"); }),
                    zl::RuntimeFailure);
}

TEST_CASE("poll_until lets the condition's errors through", "[poll]") {
  REQUIRE_THROWS_WITH(
      poll_until([]() -> bool { throw std::runtime_error("MPI_Test failed"); }, 1.0, never_called),
      "MPI_Test failed");
}
