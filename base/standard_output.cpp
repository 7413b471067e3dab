// flush_standard_output (see standard_output.h).
#include "base/standard_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "base/errors.h"

namespace zl {
namespace {

[[noreturn]] void throw_cannot_write(int error) {
  // Without an errno, an earlier failed write left only the stream's error flag.
  throw RuntimeFailure(fmt::format("cannot write to standard output: {}",
                                   error != 0 ? std::strerror(error)
                                              : "an earlier write to it failed"));
}

}  // namespace

void flush_standard_output() {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (!flushed) throw_cannot_write(error);
  if (std::ferror(stdout) != 0) throw_cannot_write(0);
}

void write_standard_output(std::string_view text) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) throw_cannot_write(errno);
  flush_standard_output();
}

}  // namespace zl
