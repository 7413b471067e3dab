// One live run per directory (see directory_lock.h).
#include "runtime/checkpoint/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/files/run_identity.h"

namespace zl {
namespace {

std::string this_holder() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return fmt::format("pid {} on host {}", static_cast<long>(getpid()), host);
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& key) {
  const std::string path = (std::filesystem::path(dir) / kDirectoryLockName).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;  // an unwritable directory is require_writable_dir's to report
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
    const std::string holder = this_holder() + "\n";
    if (::ftruncate(fd_, 0) == 0) {
      [[maybe_unused]] const ssize_t n = ::pwrite(fd_, holder.data(), holder.size(), 0);
    }
    return;
  }
  const int error = errno;
  // The holder's line, bounded and escaped as any file content a message echoes.
  char text[256];
  const ssize_t got = error == EWOULDBLOCK ? ::pread(fd_, text, sizeof(text), 0) : 0;
  ::close(fd_);
  fd_ = -1;
  if (error != EWOULDBLOCK) {
    // No flock on this filesystem (ENOLCK: an NFS mount without a lock manager): the run goes on
    // unguarded, and says so, since a second launch into the directory is then not refused.
    fmt::print(stderr,
               "zerolap: warning: {} '{}' cannot be locked ({}): a second run started into it "
               "is not refused, so give each run its own {}\n",
               key, dir, std::strerror(error), key);
    return;
  }
  std::string_view holder(text, got > 0 ? static_cast<std::size_t>(got) : 0);
  holder = holder.substr(0, holder.find('\n'));
  throw UserError(fmt::format(
      "{} '{}' is in use by a running zerolap ({}): one live run per directory. Wait for it to "
      "end, or give this run another {}",
      key, dir, holder.empty() ? "holder unknown" : escaped_excerpt(holder, 200, Quotes::AsIs),
      key));
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::vector<DirectoryLock> lock_run_directories(const Config& config) {
  std::vector<DirectoryLock> locks;
  locks.emplace_back(config.output.dir, "output.dir");
  std::error_code ec;
  const std::string& ck = config.checkpoint.dir;
  if (!ck.empty() && !std::filesystem::equivalent(ck, config.output.dir, ec)) {
    locks.emplace_back(ck, "checkpoint.dir");
  }
  return locks;
}

}  // namespace zl
