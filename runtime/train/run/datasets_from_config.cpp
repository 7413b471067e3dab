// load_datasets: the [data] section turned into datasets (see datasets_from_config.h).
#include "runtime/train/run/datasets_from_config.h"

#include <new>
#include <string>

#include <fmt/format.h>

#include "base/errors.h"

namespace zl {

namespace {

// The keys that size the data of `config` and where they were set, for a message.
std::string data_size_keys(const Config& config) {
  const DataConfig& d = config.data;
  switch (d.kind) {
    case DataKind::FashionMnist: return fmt::format("data.path = '{}'", d.path);
    case DataKind::Idx: return fmt::format("data.train_images = '{}'", d.train_images);
    case DataKind::Spirals:
    case DataKind::Teacher:
      return fmt::format("data.train_samples = {} ({}), data.test_samples = {} ({})",
                         d.train_samples, where_set(config, "data.train_samples"), d.test_samples,
                         where_set(config, "data.test_samples"));
  }
  return "";
}

DatasetSplits load_splits(const Config& config) {
  const auto& d = config.data;
  const auto& widths = config.model.widths;
  DatasetSplits splits;
  switch (d.kind) {
    case DataKind::FashionMnist: splits = load_fashion_mnist(d.path); break;
    case DataKind::Idx:
      splits = load_idx_splits(d.train_images, d.train_labels, d.test_images, d.test_labels, "idx");
      break;
    case DataKind::Spirals: {
      SpiralsSpec s;
      s.classes = widths.back();
      s.train_per_class = std::max<std::int64_t>(1, d.train_samples / s.classes);
      s.test_per_class = std::max<std::int64_t>(1, d.test_samples / s.classes);
      s.noise = d.noise;
      s.seed = d.seed;
      splits = make_spirals(s);
      break;
    }
    case DataKind::Teacher:
      splits = make_teacher(TeacherSpec{.input_dim = widths.front(),
                                        .hidden_dim = d.teacher_hidden,
                                        .output_dim = widths.back(),
                                        .task = d.teacher_task,
                                        .train_samples = d.train_samples,
                                        .test_samples = d.test_samples,
                                        .noise = d.noise,
                                        .seed = d.seed});
      break;
  }
  return splits;
}

}  // namespace

DatasetSplits load_datasets(const Config& config) {
  const auto& widths = config.model.widths;
  DatasetSplits splits;
  try {
    splits = load_splits(config);
  } catch (const std::bad_alloc&) {
    // The memory check before the model is allocated counts the model and its optimizer state,
    // not the data: a data set too large for the process ends here (exit 1), named.
    throw RuntimeFailure(fmt::format(
        "out of host memory loading the {} data ({}): this process could not allocate it; use "
        "fewer samples, or a node with more free memory",
        to_string(config.data.kind), data_size_keys(config)));
  }
  const auto& d = config.data;
  const Dataset& train = splits.train;
  if (train.feature_dim != widths.front()) {
    throw UserError(fmt::format(
        "{}: model.widths starts with {} but the {} data has {} features per sample; set "
        "model.widths[0] = {}",
        where_set(config, "model.widths"), widths.front(), to_string(d.kind), train.feature_dim,
        train.feature_dim));
  }
  const std::int64_t outputs =
      train.task == TaskKind::Classification ? train.num_classes : train.target_dim;
  if (train.task == TaskKind::Classification ? outputs > widths.back() : outputs != widths.back()) {
    throw UserError(fmt::format(
        "{}: model.widths ends with {} but the {} data has {} {}; set the last width to {}",
        where_set(config, "model.widths"), widths.back(), to_string(d.kind), outputs,
        train.task == TaskKind::Classification ? "classes" : "targets", outputs));
  }
  return splits;
}

}  // namespace zl
