// require_writable_dir (see writable_dir.h).
#include "base/writable_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "base/errors.h"

namespace zl {

void require_writable_dir(const std::string& dir, const std::string& key) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw UserError(fmt::format("{} = '{}' cannot be created: {} (set {} to a writable directory)",
                                key, dir, ec.message(), key));
  }
  if (!fs::is_directory(dir, ec)) {
    throw UserError(fmt::format("{} = '{}' is not a directory (set {} to a directory)", key, dir,
                                key));
  }
  // A file of its own (named by the pid), created and removed at once: what a write needs (a read-only
  // filesystem, a permission or a quota shows here), whatever the directory's mode bits say.
  const std::string probe =
      (fs::path(dir) / fmt::format(".zerolap-write-check-{}", ::getpid())).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) {
    throw UserError(fmt::format("{} = '{}' is not writable: {} (set {} to a writable directory)",
                                key, dir, std::strerror(errno), key));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace zl
