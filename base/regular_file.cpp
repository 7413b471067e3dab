// open_regular_file, read_small_file and escaped_excerpt (see regular_file.h).
#include "base/regular_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/errors.h"

namespace zl {

const char* file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a file of unknown type";
}

ReadableFile::~ReadableFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadableFile::ReadableFile(ReadableFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

ReadableFile& ReadableFile::operator=(ReadableFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

int ReadableFile::release() { return std::exchange(fd_, -1); }

namespace {

// `fd`, opened with O_NONBLOCK, as a FILE* whose writes block as usual; nullptr with errno set
// (and `fd` closed) when that fails.
std::FILE* blocking_stream(int fd, const char* mode) {
  const int flags = ::fcntl(fd, F_GETFL);
  std::FILE* f = flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0
                     ? nullptr
                     : ::fdopen(fd, mode);
  if (f == nullptr) {
    const int error = errno;
    ::close(fd);
    errno = error;
  }
  return f;
}

}  // namespace

std::FILE* open_cut_at(const std::string& path, std::int64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return nullptr;
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  if (stated && !S_ISREG(st.st_mode)) {
    ::close(fd);
    errno = 0;
    return nullptr;
  }
  if (!stated || ::ftruncate(fd, bytes) != 0 || ::lseek(fd, 0, SEEK_END) < 0) {
    const int error = errno;
    ::close(fd);
    errno = error;
    return nullptr;
  }
  return blocking_stream(fd, "w");  // fdopen truncates nothing
}

std::FILE* open_for_writing(const std::string& path, const char* mode, const std::string& what) {
  // O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader, forever; without
  // one it fails at once with ENXIO.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
                        0666);
  if (fd < 0 && errno == ENXIO) {
    throw UserError(fmt::format("{} '{}' is not a regular file (it is a FIFO or a socket)", what,
                                path));
  }
  if (fd < 0) return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
    ::close(fd);
    throw UserError(fmt::format("{} '{}' is not a regular file (it is {})", what, path,
                                file_type_name(st.st_mode)));
  }
  return blocking_stream(fd, mode);
}

ReadableFile open_regular_file(const std::string& path, const std::string& what,
                               std::int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    throw UserError(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno)));
  }
  ReadableFile file(fd, 0);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw UserError(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw UserError(fmt::format("{} '{}' is not a regular file (it is {})", what, path,
                                file_type_name(st.st_mode)));
  }
  if (max_bytes >= 0 && st.st_size > max_bytes) {
    throw UserError(
        fmt::format("{} '{}' is larger than {} bytes, the most a {} may have ({} "
                    "bytes): is it the right file?",
                    what, path, max_bytes, what, st.st_size));
  }
  // Reads of a regular file do not block long; clear the flag so that reads behave as usual.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return ReadableFile(file.release(), static_cast<std::int64_t>(st.st_size));
}

std::string read_small_file(const std::string& path, const std::string& what,
                            std::int64_t max_bytes) {
  const ReadableFile file = open_regular_file(path, what, max_bytes);
  std::string text;
  char buffer[1 << 16];
  while (static_cast<std::int64_t>(text.size()) <= max_bytes) {
    const ssize_t n = ::read(file.fd(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw UserError(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno)));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  if (static_cast<std::int64_t>(text.size()) > max_bytes) {  // it grew while read
    throw UserError(
        fmt::format("{} '{}' is larger than {} bytes, the most a {} may have: is it "
                    "the right file?",
                    what, path, max_bytes, what));
  }
  return text;
}

std::string escaped_excerpt(std::string_view bytes, std::size_t max_bytes, Quotes quotes) {
  std::string out;
  const std::string_view shown = bytes.substr(0, max_bytes);
  for (const char c : shown) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || (c == '"' && quotes == Quotes::Escaped)) {
      out += '\\';
      out += c;
    } else if (u >= 0x20 && u < 0x7F) {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  if (shown.size() < bytes.size()) out += fmt::format("... ({} bytes in all)", bytes.size());
  return out;
}

}  // namespace zl
