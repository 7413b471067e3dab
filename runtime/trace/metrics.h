// The metrics file of a run: CSV with a header row, one row per log or eval step; a column without
// a value in that row is left empty. Written by rank 0 only, flushed after every row so a killed
// run keeps what it logged; a row that cannot be written (a full disk) ends the run with exit 1.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

namespace zl {

// Creates output.dir (and parents) for the run's files; a UserError saying why when it cannot.
void ensure_output_dir(const std::string& dir);

struct MetricsRow {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  std::optional<double> train_loss, train_accuracy, test_loss, test_accuracy, samples_per_s, lr,
      grad_norm;
  double elapsed_s = 0.0;
};

class MetricsWriter {
 public:
  MetricsWriter() = default;  // writes nothing
  // Starts `path` afresh, or for a run resumed at step `resumed_step` (> 0) keeps the header and
  // the rows up to that step and appends after them: rows a crashed run logged past its last
  // checkpoint are dropped, since the resumed run logs those steps again. The file is cut after
  // the kept rows in place, not written again, so a resume killed meanwhile loses none of them.
  MetricsWriter(const std::string& path, std::int64_t resumed_step);

  void write(const MetricsRow& row);
  static const char* header() {
    return "step,epoch,train_loss,train_accuracy,test_loss,test_accuracy,samples_per_s,lr,"
           "grad_norm,elapsed_s";
  }

  // Of the rows kept from the run resumed: the last one's elapsed_s (0 when none), which this
  // run's elapsed_s continues from so the column never goes back; and whether that row has a
  // test loss at `step` (a finished run resumed: its final evaluation is already there).
  double kept_elapsed_s() const { return kept_elapsed_s_; }
  bool kept_test_row_at(std::int64_t step) const { return kept_test_step_ == step; }

 private:
  void put(const std::string& text);  // RuntimeFailure naming the file when it cannot be written

  struct CloseFile {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  std::unique_ptr<std::FILE, CloseFile> file_;
  std::string path_;
  double kept_elapsed_s_ = 0.0;
  std::int64_t kept_test_step_ = -1;
};

}  // namespace zl
