// Checks on an error message that echoes a file's content: it must quote that content as a
// bounded, escaped excerpt (escaped_excerpt, base/regular_file.h), whatever the file held.
#pragma once

#include <string>

#include <catch2/catch.hpp>

namespace zl::test {

// The message exists, is short, and holds no raw escape or newline byte from the file.
inline void check_bounded_escaped(const std::string& message) {
  INFO(message.substr(0, 300));
  REQUIRE_FALSE(message.empty());
  CHECK(message.size() < 1000);
  CHECK(message.find('\x1b') == std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

}  // namespace zl::test
