// Opening a file zerolap reads (config, data, checkpoint, the `latest` pointer) without blocking:
// open(2) with O_NONBLOCK, so a FIFO or a device returns at once instead of waiting for a writer;
// then fstat of that descriptor (no race with a rename) must show a regular file of a plausible
// size. Opening an output file the same way (a FIFO would block the writer until a reader comes).
// And the bounded, escaped excerpt of file content that error messages may echo.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace zl {

// "a directory", "a FIFO", "a character device", ...: what a stat's st_mode says a file is.
const char* file_type_name(mode_t mode);

// An open, regular file for reading (blocking reads again: a regular file never blocks long).
class ReadableFile {
 public:
  ReadableFile() = default;
  ReadableFile(int fd, std::int64_t size) : fd_(fd), size_(size) {}
  ~ReadableFile();
  ReadableFile(ReadableFile&& other) noexcept;
  ReadableFile& operator=(ReadableFile&& other) noexcept;
  ReadableFile(const ReadableFile&) = delete;
  ReadableFile& operator=(const ReadableFile&) = delete;

  int fd() const { return fd_; }
  std::int64_t size() const { return size_; }
  // Hands the descriptor over (e.g. to gzdopen, which closes it).
  int release();

 private:
  int fd_ = -1;
  std::int64_t size_ = 0;
};

// Opens `path` as above. `what` names the file in messages ("config file", "checkpoint pointer");
// `max_bytes` < 0: no size limit. Throws UserError "<what> '<path>' ...": missing, unreadable, not
// a regular file (naming what it is: a FIFO, a directory, a device), or larger than max_bytes.
ReadableFile open_regular_file(const std::string& path, const std::string& what,
                               std::int64_t max_bytes = -1);

// The whole content of a small file opened with open_regular_file (bounded even if it grows).
std::string read_small_file(const std::string& path, const std::string& what,
                            std::int64_t max_bytes);

// Opens `path` for writing as fopen(path, mode) does ("w", "wb": created or truncated), but
// without blocking: a FIFO or a socket there is a UserError "<what> '<path>' is not a regular file
// (it is a FIFO)" at once, not a writer waiting for a reader. A device (/dev/null, /dev/full) is
// written as fopen would. Returns nullptr with errno set when the open fails otherwise.
std::FILE* open_for_writing(const std::string& path, const char* mode, const std::string& what);
// Opens the existing regular file `path` for writing without blocking, cuts it to `bytes` and
// positions the stream at its end (a file kept up to there, written on after). Returns nullptr
// with errno set when that fails, or with errno 0 when `path` is no regular file.
std::FILE* open_cut_at(const std::string& path, std::int64_t bytes);

// At most `max_bytes` of `bytes` for a message: printable ASCII as is, a backslash (and, unless
// Quotes::AsIs, a quote) escaped, anything else as \xNN, and "..." (with the total length) when
// cut. AsIs is for listing text that is not quoted (`zerolap inspect`'s stored config).
enum class Quotes { Escaped, AsIs };
std::string escaped_excerpt(std::string_view bytes, std::size_t max_bytes = 80,
                            Quotes quotes = Quotes::Escaped);

}  // namespace zl
