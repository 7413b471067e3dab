// One live run per directory: rank 0 of `zerolap train` and `zerolap bench` holds an exclusive
// flock on `.zerolap.lock` in output.dir and checkpoint.dir for as long as the command runs,
// taken before the ownership rule (run_outputs.h) reads the directory. A second launch into a
// directory a live run writes is exit 2 naming the holder, instead of both writing there (or the
// second taking the first's identity as "the same command again" and removing its checkpoints).
// The kernel releases the lock when the holder dies, SIGKILL included, so a restart after a crash
// is never refused by a stale lock. On a filesystem without flock the run goes on unlocked,
// with a warning.
#pragma once

#include <string>
#include <vector>

#include "runtime/config/config.h"

namespace zl {

class DirectoryLock {
 public:
  // Locks `dir` (an existing directory) until destroyed; UserError (exit 2) naming `key`, the
  // directory and the holder's pid and host when another open lock holds it.
  DirectoryLock(const std::string& dir, const std::string& key);
  ~DirectoryLock();
  DirectoryLock(DirectoryLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  DirectoryLock& operator=(DirectoryLock&&) = delete;

 private:
  int fd_ = -1;
};

// output.dir's lock, and checkpoint.dir's where it is set and another directory.
std::vector<DirectoryLock> lock_run_directories(const Config& config);

}  // namespace zl
