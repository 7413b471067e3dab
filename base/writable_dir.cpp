// require_writable_dir (see writable_dir.h).
#include "base/writable_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "base/errors.h"

namespace zl {
namespace {

// At least the longest path, relative to output.dir or checkpoint.dir, of a file a run writes
// there: the probe file is named that long.
constexpr std::size_t kLongestNameBelow = 80;

}  // namespace

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
  // A file of its own (named by the pid), created and removed at once: what a write needs (a
  // read-only filesystem, a permission or a quota shows here), whatever the directory's mode bits
  // say. Its name is at least as long as the longest path a run writes below the directory (a
  // sharded checkpoint's step_N/shard_R_of_W.gG.safetensors: 61 characters with a 16-digit step,
  // a 7-digit world and generation 0; 80 leaves a margin), so a directory whose path leaves no
  // room for those names under PATH_MAX is refused here, not at the first checkpoint after the
  // training it cost (exit 2 there, or 1 for a shard, as if the disk had failed).
  std::string name = fmt::format(".zerolap-write-check-{}-", ::getpid());
  name.resize(std::max<std::size_t>(name.size(), kLongestNameBelow), 'x');
  const std::string probe = (fs::path(dir) / name).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0 && errno == ENAMETOOLONG) {
    throw UserError(fmt::format(
        "{} = '{}' is too long a path ({} characters): the files a run writes in it would pass "
        "the system's limit on a path (set {} to a shorter path)",
        key, dir, dir.size(), key));
  }
  if (fd < 0) {
    throw UserError(fmt::format("{} = '{}' is not writable: {} (set {} to a writable directory)",
                                key, dir, std::strerror(errno), key));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace zl
