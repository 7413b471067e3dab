// Synthetic datasets: `spirals` (k interleaved 2-D spiral arms) and `teacher` (inputs ~ N(0, 1)
// labelled by a random tanh MLP). Everything comes from DataRng streams of the one seed and is
// computed in double with a fixed operation order, then rounded to float, so a seed gives bitwise
// identical data on every machine. Train and test are independent draws (separate streams).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/errors.h"
#include "data/data_rng.h"
#include "data/dataset.h"

namespace zl {
namespace {

constexpr double kPi = 3.14159265358979323846;
// How far (radians) an arm turns from the centre to radius 1; 4 is the classic CS231n spiral,
// which a small MLP separates only with a hidden layer or two.
constexpr double kSpiralSweep = 4.0;
constexpr std::int64_t kMaxSamples = kMaxSyntheticSamples;

// DataRng streams of one seed. Noise has its own streams so that changing `noise` leaves the
// inputs (and, for the teacher, its weights) unchanged.
enum Stream : std::uint64_t {
  kTrainInputs = 1,
  kTestInputs = 2,
  kTeacherWeights = 3,
  kTeacherCalibration = 4,
  kTrainNoise = 5,
  kTestNoise = 6,
};

void require(bool ok, const std::string& message) {
  if (!ok) throw UserError(message);
}

// Sample i is class i % classes, so classes are exactly balanced and every prefix of the set (and
// every unshuffled batch) holds all of them.
Dataset spirals_split(const SpiralsSpec& spec, std::int64_t per_class, Stream stream,
                      const char* name) {
  Dataset data;
  data.name = name;
  data.task = TaskKind::Classification;
  data.num_samples = spec.classes * per_class;
  data.feature_dim = 2;
  data.num_classes = spec.classes;
  data.features.resize(static_cast<std::size_t>(data.num_samples) * 2);
  data.labels.resize(static_cast<std::size_t>(data.num_samples));
  DataRng rng(spec.seed, stream);
  for (std::int64_t i = 0; i < data.num_samples; ++i) {
    const std::int64_t c = i % spec.classes;
    const double radius = rng.uniform();
    const double angle = 2.0 * kPi * static_cast<double>(c) / static_cast<double>(spec.classes) +
                         kSpiralSweep * radius + static_cast<double>(spec.noise) * rng.normal();
    data.features[2 * i] = static_cast<float>(radius * std::cos(angle));
    data.features[2 * i + 1] = static_cast<float>(radius * std::sin(angle));
    data.labels[i] = static_cast<std::int32_t>(c);
  }
  return data;
}

// The teacher: out = b2 + W2 tanh(b1 + W1 x), in double. W1 (hidden, input), W2 (output, hidden).
struct Teacher {
  std::int64_t input_dim, hidden_dim, output_dim;
  std::vector<double> w1, b1, w2, b2;

  // out (output_dim) = teacher(x (input_dim)); the float inputs are the stored features, so the
  // function a student must learn is a function of exactly what it sees.
  void forward(const float* x, double* out, std::vector<double>& hidden) const {
    for (std::int64_t j = 0; j < hidden_dim; ++j) {
      double acc = b1[j];
      const double* row = &w1[j * input_dim];
      for (std::int64_t i = 0; i < input_dim; ++i) acc += row[i] * static_cast<double>(x[i]);
      hidden[j] = std::tanh(acc);
    }
    for (std::int64_t k = 0; k < output_dim; ++k) {
      double acc = b2[k];
      const double* row = &w2[k * hidden_dim];
      for (std::int64_t j = 0; j < hidden_dim; ++j) acc += row[j] * hidden[j];
      out[k] = acc;
    }
  }
};

void fill_normal(std::vector<float>& v, DataRng& rng) {
  for (float& x : v) x = static_cast<float>(rng.normal());
}

Teacher make_teacher_net(const TeacherSpec& spec) {
  Teacher t{spec.input_dim, spec.hidden_dim, spec.output_dim, {}, {}, {}, {}};
  DataRng rng(spec.seed, kTeacherWeights);
  // 1/sqrt(fan_in) keeps pre-activations ~ N(0, 1): tanh neither saturated nor linear.
  const double s1 = 1.0 / std::sqrt(static_cast<double>(spec.input_dim));
  const double s2 = 1.0 / std::sqrt(static_cast<double>(spec.hidden_dim));
  t.w1.resize(static_cast<std::size_t>(spec.hidden_dim * spec.input_dim));
  t.b1.resize(static_cast<std::size_t>(spec.hidden_dim));
  t.w2.resize(static_cast<std::size_t>(spec.output_dim * spec.hidden_dim));
  t.b2.assign(static_cast<std::size_t>(spec.output_dim), 0.0);
  for (double& w : t.w1) w = s1 * rng.normal();
  for (double& b : t.b1) b = 0.5 * rng.normal();
  for (double& w : t.w2) w = s2 * rng.normal();
  for (double& b : t.b2) b = 0.1 * rng.normal();

  if (spec.task == TaskKind::Classification) {
    // A random teacher's argmax favours a few classes, so b2 is fitted on a calibration draw (its
    // own stream: train and test stay independent of it): centre each logit, then nudge the bias
    // of over- and under-used classes towards equal shares. Fixed iteration count: deterministic.
    constexpr std::int64_t kCalibration = 4096;
    constexpr int kBalanceIterations = 30;
    const std::int64_t classes = spec.output_dim;
    std::vector<float> x(static_cast<std::size_t>(kCalibration * spec.input_dim));
    DataRng calib(spec.seed, kTeacherCalibration);
    fill_normal(x, calib);
    t.b2.assign(static_cast<std::size_t>(classes), 0.0);
    std::vector<double> logits(static_cast<std::size_t>(kCalibration * classes));
    std::vector<double> hidden(static_cast<std::size_t>(spec.hidden_dim));
    std::vector<double> mean(static_cast<std::size_t>(classes), 0.0);
    for (std::int64_t n = 0; n < kCalibration; ++n) {
      t.forward(&x[n * spec.input_dim], &logits[n * classes], hidden);
      for (std::int64_t k = 0; k < classes; ++k) mean[k] += logits[n * classes + k];
    }
    double var = 0.0;
    for (std::int64_t n = 0; n < kCalibration; ++n) {
      for (std::int64_t k = 0; k < classes; ++k) {
        const double d = logits[n * classes + k] - mean[k] / kCalibration;
        var += d * d;
      }
    }
    const double step = 0.5 * std::sqrt(var / static_cast<double>(kCalibration * classes));
    for (std::int64_t k = 0; k < classes; ++k) t.b2[k] = -mean[k] / kCalibration;
    std::vector<double> count(static_cast<std::size_t>(classes));
    for (int it = 0; it < kBalanceIterations; ++it) {
      std::fill(count.begin(), count.end(), 1.0);  // +1: log stays finite for an unused class
      for (std::int64_t n = 0; n < kCalibration; ++n) {
        std::int64_t best = 0;
        for (std::int64_t k = 1; k < classes; ++k) {
          if (logits[n * classes + k] + t.b2[k] > logits[n * classes + best] + t.b2[best]) best = k;
        }
        count[best] += 1.0;
      }
      const double fair =
          static_cast<double>(kCalibration + classes) / static_cast<double>(classes);
      for (std::int64_t k = 0; k < classes; ++k) t.b2[k] -= step * std::log(count[k] / fair);
    }
  }
  return t;
}

Dataset teacher_split(const TeacherSpec& spec, const Teacher& teacher, std::int64_t count,
                      Stream inputs, Stream noise, const char* name) {
  Dataset data;
  data.name = name;
  data.task = spec.task;
  data.num_samples = count;
  data.feature_dim = spec.input_dim;
  data.features.resize(static_cast<std::size_t>(count * spec.input_dim));
  DataRng input_rng(spec.seed, inputs);
  fill_normal(data.features, input_rng);

  DataRng noise_rng(spec.seed, noise);
  std::vector<double> out(static_cast<std::size_t>(spec.output_dim));
  std::vector<double> hidden(static_cast<std::size_t>(spec.hidden_dim));
  if (spec.task == TaskKind::Classification) {
    data.num_classes = spec.output_dim;
    data.labels.resize(static_cast<std::size_t>(count));
  } else {
    data.target_dim = spec.output_dim;
    data.targets.resize(static_cast<std::size_t>(count * spec.output_dim));
  }
  for (std::int64_t n = 0; n < count; ++n) {
    teacher.forward(&data.features[n * spec.input_dim], out.data(), hidden);
    if (spec.task == TaskKind::Classification) {
      // First maximum wins a tie, so the label is well defined.
      data.labels[n] =
          static_cast<std::int32_t>(std::max_element(out.begin(), out.end()) - out.begin());
    } else {
      for (std::int64_t k = 0; k < spec.output_dim; ++k) {
        const double eps =
            spec.noise > 0.0f ? static_cast<double>(spec.noise) * noise_rng.normal() : 0.0;
        data.targets[n * spec.output_dim + k] = static_cast<float>(out[k] + eps);
      }
    }
  }
  return data;
}

}  // namespace

DatasetSplits make_spirals(const SpiralsSpec& spec) {
  require(
      spec.classes >= 2 && spec.classes <= 1000,
      fmt::format("spirals: the class count (the model's output width) must be in 2..1000, got {}",
                  spec.classes));
  require(spec.train_per_class >= 1 && spec.test_per_class >= 1,
          fmt::format("spirals: samples per class must be >= 1 for train and test, got {} and {}; "
                      "raise data.train_samples / data.test_samples",
                      spec.train_per_class, spec.test_per_class));
  require(spec.train_per_class <= kMaxSamples / spec.classes &&
              spec.test_per_class <= kMaxSamples / spec.classes,
          fmt::format("spirals: {} classes x {} / {} samples per class exceeds {} samples",
                      spec.classes, spec.train_per_class, spec.test_per_class, kMaxSamples));
  require(std::isfinite(spec.noise) && spec.noise >= 0.0f,
          fmt::format("spirals: data.noise must be a finite value >= 0, got {}", spec.noise));
  DatasetSplits splits;
  splits.train = spirals_split(spec, spec.train_per_class, kTrainInputs, "spirals/train");
  splits.test = spirals_split(spec, spec.test_per_class, kTestInputs, "spirals/test");
  return splits;
}

DatasetSplits make_teacher(const TeacherSpec& spec) {
  require(spec.input_dim >= 1 && spec.hidden_dim >= 1 && spec.output_dim >= 1,
          fmt::format("teacher: input, hidden and output widths must be >= 1, got {}, {}, {} "
                      "(model.widths and data.teacher_hidden)",
                      spec.input_dim, spec.hidden_dim, spec.output_dim));
  require(spec.task != TaskKind::Classification || spec.output_dim >= 2,
          fmt::format("teacher: classification needs >= 2 classes (the model's output width), "
                      "got {}",
                      spec.output_dim));
  require(
      spec.input_dim <= kMaxTeacherInputs && spec.hidden_dim <= kMaxTeacherHidden &&
          spec.output_dim <= kMaxTeacherOutputs,
      fmt::format("teacher: widths {}, {}, {} are too large for a synthetic set (at most {}, "
                  "{}, {})",
                  spec.input_dim, spec.hidden_dim, spec.output_dim, kMaxTeacherInputs, kMaxTeacherHidden,
                  kMaxTeacherOutputs));
  require(spec.train_samples >= 1 && spec.test_samples >= 1 &&
              spec.train_samples <= kMaxSamples / spec.input_dim &&
              spec.test_samples <= kMaxSamples / spec.input_dim,
          fmt::format("teacher: data.train_samples and data.test_samples must be >= 1 and at most "
                      "{} values of input, got {} and {}",
                      kMaxSamples, spec.train_samples, spec.test_samples));
  require(std::isfinite(spec.noise) && spec.noise >= 0.0f,
          fmt::format("teacher: data.noise must be a finite value >= 0, got {}", spec.noise));
  const Teacher teacher = make_teacher_net(spec);
  DatasetSplits splits;
  splits.train =
      teacher_split(spec, teacher, spec.train_samples, kTrainInputs, kTrainNoise, "teacher/train");
  splits.test =
      teacher_split(spec, teacher, spec.test_samples, kTestInputs, kTestNoise, "teacher/test");
  return splits;
}

}  // namespace zl
