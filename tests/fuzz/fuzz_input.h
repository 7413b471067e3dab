// Helpers shared by the fuzz targets (tests/fuzz/fuzz_*.cpp): an input held in an anonymous
// in-memory file, so the readers under test open a real path, exactly as they do in a run.
// Contract of every target: bad input may throw UserError (exit 2 in a run); anything else that
// escapes - another exception, a sanitizer report, a hang - is a bug the fuzzer reports.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace zl::fuzz {

// An unlinked file holding `size` bytes, open as /proc/self/fd/N until destroyed.
class MemoryFile {
 public:
  MemoryFile(const std::uint8_t* data, std::size_t size) {
    fd_ = memfd_create("zerolap-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();  // the harness, not the input, is broken
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<std::size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace zl::fuzz
