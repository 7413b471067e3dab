// In-memory datasets: Fashion-MNIST / any IDX pair (plain or .gz), and two synthetic sets,
// `spirals` (k-class 2-D spirals) and `teacher` (outputs of a random teacher MLP). Features are
// row-major float32 (num_samples, feature_dim). All loading errors are UserError naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zl {

enum class TaskKind { Classification, Regression };

struct Dataset {
  std::string name;
  TaskKind task = TaskKind::Classification;
  std::int64_t num_samples = 0;
  std::int64_t feature_dim = 0;
  std::int64_t num_classes = 0;  // classification
  std::int64_t target_dim = 0;   // regression
  std::vector<float> features;       // (num_samples, feature_dim)
  std::vector<std::int32_t> labels;  // (num_samples) for classification
  std::vector<float> targets;        // (num_samples, target_dim) for regression
};

struct DatasetSplits {
  Dataset train;
  Dataset test;
};

// IDX files (the MNIST format): images idx3 (uint8, n x rows x cols) scaled to [0, 1], labels idx1.
// gzip files are recognised by their magic bytes (a `.gz` name is customary, not required).
// num_classes = largest label + 1. Errors (missing file, wrong magic, absurd dimensions, truncated
// data, bytes beyond what the header declares, image/label count mismatch) name the path.
Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path,
                      const std::string& name);

// Train and test IDX pairs named `<name>/train` and `<name>/test`: their image sizes must agree,
// and both get num_classes = (largest label over both) + 1 (a test set may lack the top class).
DatasetSplits load_idx_splits(const std::string& train_images, const std::string& train_labels,
                              const std::string& test_images, const std::string& test_labels,
                              const std::string& name);

// Fashion-MNIST from a directory holding {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
// (Debian's dataset-fashion-mnist installs them in /usr/share/datasets/fashion-mnist).
DatasetSplits load_fashion_mnist(const std::string& dir);
inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// The sizes a synthetic set may have (the config checks them up front, naming the key): at most
// 2^31 samples per split (spirals), 2^31 input values per split (teacher), and a teacher of at
// most 2^20 inputs, 2^16 hidden units and 2^16 outputs.
inline constexpr std::int64_t kMaxSyntheticSamples = std::int64_t{1} << 31;
inline constexpr std::int64_t kMaxTeacherInputs = std::int64_t{1} << 20;
inline constexpr std::int64_t kMaxTeacherHidden = std::int64_t{1} << 16;
inline constexpr std::int64_t kMaxTeacherOutputs = std::int64_t{1} << 16;

struct SpiralsSpec {
  std::int64_t classes = 3;
  std::int64_t train_per_class = 1000;
  std::int64_t test_per_class = 200;
  float noise = 0.2f;
  std::uint64_t seed = 0;
};
// Arm c of `classes` turns 4 radians from angle 2*pi*c/classes; radius ~ U[0, 1), angle noise
// ~ N(0, noise^2). Sample i is class i % classes (exactly balanced). Train and test are
// independent draws; a seed gives bitwise identical sets on every machine. Bad spec: UserError.
DatasetSplits make_spirals(const SpiralsSpec& spec);

struct TeacherSpec {
  std::int64_t input_dim = 32;
  std::int64_t hidden_dim = 64;
  std::int64_t output_dim = 8;   // regression targets, or classes when classification
  TaskKind task = TaskKind::Regression;
  std::int64_t train_samples = 8192;
  std::int64_t test_samples = 2048;
  float noise = 0.0f;            // Gaussian noise added to regression targets
  std::uint64_t seed = 0;
};
// Inputs ~ N(0, 1); the fixed random teacher input->hidden(tanh)->output gives regression targets
// (+ N(0, noise^2)) or, for classification, labels = argmax (its output bias is calibrated so the
// classes come out roughly balanced). Deterministic from the seed like spirals.
DatasetSplits make_teacher(const TeacherSpec& spec);

// Copies the rows `indices` of `data` into x (count, feature_dim) and labels (count) or
// targets (count, target_dim) (host memory; whichever applies to the task, the other may be null).
void gather_batch(const Dataset& data, const std::int64_t* indices, std::int64_t count, float* x,
                  std::int32_t* labels, float* targets);

}  // namespace zl
