// MetricsWriter: the CSV metrics file (see metrics.h).
#include "runtime/trace/metrics.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"
#include "base/regular_file.h"

namespace zl {

void ensure_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UserError(fmt::format("cannot create output.dir '{}': {}", dir, ec.message()));
}

MetricsWriter::MetricsWriter(const std::string& path, std::int64_t resumed_step) {
  std::vector<std::string> kept;  // data rows of the earlier run up to resumed_step
  std::error_code ec;
  if (resumed_step > 0 && std::filesystem::exists(path, ec)) {
    // Opened without blocking and checked to be a regular file, as every file zerolap reads.
    const ReadableFile earlier = open_regular_file(path, "metrics file");
    std::ifstream in(fmt::format("/proc/self/fd/{}", earlier.fd()));
    std::string line;
    std::getline(in, line);  // the header, written again below
    while (std::getline(in, line)) {
      const std::int64_t step = std::strtoll(line.c_str(), nullptr, 10);
      if (!line.empty() && step <= resumed_step) kept.push_back(line);
    }
  }
  file_.reset(open_for_writing(path, "w", "metrics file"));
  if (!file_) {
    throw UserError(fmt::format("cannot write metrics file '{}': {} (check output.dir)", path,
                                std::strerror(errno)));
  }
  path_ = path;
  std::string text = std::string(header()) + "\n";
  for (const auto& line : kept) text += line + "\n";
  put(text);
  if (!kept.empty()) {  // columns: step,epoch,train_loss,train_accuracy,test_loss,...,elapsed_s
    const std::string& last = kept.back();
    kept_elapsed_s_ = std::strtod(last.c_str() + last.rfind(',') + 1, nullptr);
    std::size_t at = 0;
    for (int comma = 0; comma < 4 && at != std::string::npos; ++comma) at = last.find(',', at + 1);
    if (at != std::string::npos && at + 1 < last.size() && last[at + 1] != ',') {
      kept_test_step_ = std::strtoll(last.c_str(), nullptr, 10);
    }
  }
}

// Whole rows or none: the text goes to the file descriptor at once (no stdio buffer that could
// reach the disk in part later), and when the disk takes only part of it (a full filesystem
// takes what fits in its last page) the file is cut back to where the text began, so it always
// ends with a whole row. The run then ends (RuntimeFailure, exit 1) naming the file.
void MetricsWriter::put(const std::string& text) {
  const int fd = fileno(file_.get());
  const off_t before = ::lseek(fd, 0, SEEK_CUR);
  std::size_t done = 0;
  int error = 0;
  while (done < text.size() && error == 0) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      error = n == 0 ? ENOSPC : errno;
    }
  }
  if (error == 0) return;
  const std::string reason = std::strerror(error);
  // A device (/dev/full) cannot be cut back, and has no rows to keep whole.
  if (before >= 0 && ::ftruncate(fd, before) == 0) ::lseek(fd, before, SEEK_SET);
  throw RuntimeFailure(
      fmt::format("cannot write metrics file '{}': {} (disk full?)", path_, reason));
}

namespace {
std::string cell(const std::optional<double>& v) { return v ? fmt::format("{:.7g}", *v) : ""; }
}  // namespace

void MetricsWriter::write(const MetricsRow& r) {
  if (!file_) return;
  put(fmt::format("{},{},{},{},{},{},{},{},{},{:.3f}\n", r.step, r.epoch, cell(r.train_loss),
                  cell(r.train_accuracy), cell(r.test_loss), cell(r.test_accuracy),
                  cell(r.samples_per_s), cell(r.lr), cell(r.grad_norm), r.elapsed_s));
}

}  // namespace zl
