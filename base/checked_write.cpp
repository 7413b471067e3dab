// write_whole_file, write_whole_file_durably and replace_whole_file (see checked_write.h).
#include "base/checked_write.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/errors.h"
#include "base/regular_file.h"

namespace zl {
namespace {

void write_checked(const std::string& path, std::string_view text, std::string_view what,
                   bool sync) {
  std::FILE* f = open_for_writing(path, "wb", std::string(what));
  if (f == nullptr) {
    throw RuntimeFailure(fmt::format("cannot write {} '{}': {}", what, path, std::strerror(errno)));
  }
  // Buffered bytes reach the file only at the flush: a full disk shows there or at the close.
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fflush(f) == 0 && ok;
  if (sync) ok = ok && ::fsync(fileno(f)) == 0;
  int error = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    std::remove(path.c_str());
    throw RuntimeFailure(fmt::format("cannot write {} '{}': {}", what, path,
                                     std::strerror(error != 0 ? error : EIO)));
  }
}

}  // namespace

bool is_failure_of_the_moment(int error) {
  return error == ENOSPC || error == EDQUOT || error == EIO || error == EMFILE ||
         error == ENFILE || error == ENOMEM;
}

void write_whole_file(const std::string& path, std::string_view text, std::string_view what) {
  write_checked(path, text, what, /*sync=*/false);
}

void write_whole_file_durably(const std::string& path, std::string_view text,
                              std::string_view what) {
  write_checked(path, text, what, /*sync=*/true);
}

void replace_whole_file(const std::string& path, std::string_view text, std::string_view what) {
  const std::string partial = path + kPartialSuffix;
  write_checked(partial, text, what, /*sync=*/false);
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(partial.c_str());
    throw RuntimeFailure(fmt::format("cannot write {} '{}': renaming '{}': {}", what, path,
                                     partial, std::strerror(error)));
  }
}

}  // namespace zl
