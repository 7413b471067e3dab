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

#include "base/checked_write.h"
#include "base/errors.h"
#include "base/regular_file.h"

namespace zl {

void ensure_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UserError(fmt::format("cannot create output.dir '{}': {}", dir, ec.message()));
}

namespace {

// What a resumed run keeps of the earlier metrics file: its rows up to the resumed step.
struct KeptRows {
  std::string last;           // the last row kept ("" when none)
  std::int64_t bytes = 0;     // where the kept rows end in the file, when in_place
  bool in_place = false;      // the file is the header, then the kept rows, then only dropped ones
  std::vector<std::string> rows;  // every row kept, collected only for a rewrite
};

[[noreturn]] void cannot_open(const std::string& path, int error) {
  // A full disk or inode table when the file is created is the machine's failure, as it is when a
  // row is written (exit 1, the next launch may go on); output.dir itself passed the start-up
  // check, so anything else is a directory changed since (exit 2).
  if (is_failure_of_the_moment(error)) {
    throw RuntimeFailure(fmt::format("cannot write metrics file '{}': {} (disk full?)", path,
                                     std::strerror(error)));
  }
  throw UserError(fmt::format("cannot write metrics file '{}': {} (check output.dir)", path,
                              std::strerror(error)));
}

KeptRows kept_rows(const std::string& path, std::int64_t resumed_step, bool collect) {
  // Opened without blocking and checked to be a regular file, as every file zerolap reads.
  const ReadableFile earlier = open_regular_file(path, "metrics file");
  std::ifstream in(fmt::format("/proc/self/fd/{}", earlier.fd()));
  KeptRows kept;
  std::string line;
  // The header, written again when the file is rewritten.
  if (!std::getline(in, line) || in.eof()) return kept;
  kept.in_place = line == MetricsWriter::header();
  kept.bytes = static_cast<std::int64_t>(line.size()) + 1;
  bool dropped = false;
  while (std::getline(in, line)) {
    // A row a crash cut short has no newline, and is the file's last: dropped whatever its step,
    // as a row past the resumed step is, so the cut below takes it away.
    const bool whole = !in.eof();
    const std::int64_t step = std::strtoll(line.c_str(), nullptr, 10);
    if (!line.empty() && whole && step <= resumed_step) {
      if (dropped) kept.in_place = false;  // a row kept after one dropped: the file is rewritten
      kept.bytes += static_cast<std::int64_t>(line.size()) + 1;
      if (collect) kept.rows.push_back(line);
      kept.last = line;
    } else {
      dropped = true;
    }
  }
  return kept;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& path, std::int64_t resumed_step) {
  KeptRows kept;
  std::error_code ec;
  const bool resumed = resumed_step > 0 && std::filesystem::exists(path, ec);
  if (resumed) kept = kept_rows(path, resumed_step, false);
  path_ = path;
  if (kept.in_place) {
    // The rows kept are already the file's beginning: it is cut after them, in place, and the
    // resumed run appends. Rewriting the file instead (truncate, then write the kept rows again)
    // would lose every row of the earlier run to a kill, a crash or a full disk during the write,
    // and a long run's file is large; a cut writes nothing, and keeps a link a link.
    file_.reset(open_cut_at(path, kept.bytes));
    // errno 0: no regular file now (replaced since it was read): rewritten below, as any other.
    if (!file_ && errno != 0) cannot_open(path, errno);
  }
  if (!file_) {
    // A new run, or an earlier file that is not the header and its rows in order (another
    // header, rows out of order): written afresh with the kept rows.
    if (resumed) kept = kept_rows(path, resumed_step, true);
    file_.reset(open_for_writing(path, "w", "metrics file"));
    if (!file_) cannot_open(path, errno);
    std::string text = std::string(header()) + "\n";
    for (const auto& line : kept.rows) text += line + "\n";
    put(text);
  }
  const std::string& last = kept.last;
  if (!last.empty()) {  // columns: step,epoch,train_loss,train_accuracy,test_loss,...,elapsed_s
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
