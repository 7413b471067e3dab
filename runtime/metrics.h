// The metrics file of a run: CSV with a header row, one row per log or eval step; a column without
// a value in that row is left empty. Written by rank 0 only, flushed after every row so a killed
// run keeps what it logged.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

namespace zl {

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
  // Creates (or, when appending for a resumed run, extends) `path`.
  MetricsWriter(const std::string& path, bool append);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  MetricsWriter(MetricsWriter&& other) noexcept;
  MetricsWriter& operator=(MetricsWriter&& other) noexcept;

  void write(const MetricsRow& row);
  static const char* header();

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace zl
