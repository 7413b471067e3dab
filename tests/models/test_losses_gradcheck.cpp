// Gradient checks of the two losses the trainer uses with these models (softmax_cross_entropy,
// squared_error from kernels/elementwise.h): the loss value and its gradient against a double
// reference and its central differences (see reference_math.h). A float32 softmax of 4 logits and
// per-element squared errors carry a few ulps of O(1) values (~1e-7), so atol 1e-6 / rtol 1e-5 on
// gradients and rtol 1e-5 on the loss leave ~10x headroom.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/elementwise.h"
#include "tests/models/reference_math.h"

namespace zl::test {
namespace {

constexpr Tolerance kTolGrad{1e-6, 1e-5};

// Mean cross-entropy over rows of logits (rows, cols), in double.
double ref_cross_entropy(const std::vector<double>& logits, const std::vector<std::int32_t>& labels,
                         std::int64_t rows, std::int64_t cols) {
  double total = 0.0;
  for (std::int64_t i = 0; i < rows; ++i) {
    const double* z = logits.data() + i * cols;
    double m = z[0];
    for (std::int64_t j = 1; j < cols; ++j) m = std::max(m, z[j]);
    double s = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) s += std::exp(z[j] - m);
    total += std::log(s) + m - z[labels[static_cast<std::size_t>(i)]];
  }
  return total / static_cast<double>(rows);
}

}  // namespace

TEST_CASE("softmax cross-entropy loss and gradient match finite differences", "[models]") {
  const std::int64_t rows = 3, cols = 4;
  TestRng rng(61);
  const std::vector<float> logits = rng.floats(rows * cols, -3.0, 3.0);
  const std::vector<std::int32_t> labels{2, 0, 3};
  std::vector<float> dlogits(static_cast<std::size_t>(rows * cols));
  std::int64_t correct = -1;
  const double sum = softmax_cross_entropy(ExecContext{}, logits.data(), labels.data(), rows, cols,
                                           dlogits.data(), 1.0f / rows, &correct);

  std::vector<double> z(logits.begin(), logits.end());
  const double ref_mean = ref_cross_entropy(z, labels, rows, cols);
  CHECK(sum / rows == Approx(ref_mean).epsilon(1e-5));
  std::int64_t ref_correct = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto row = logits.begin() + i * cols;
    ref_correct += (std::max_element(row, row + cols) - row) == labels[static_cast<std::size_t>(i)];
  }
  CHECK(correct == ref_correct);

  const std::vector<double> fd =
      central_differences(z, [&] { return ref_cross_entropy(z, labels, rows, cols); });
  check_close(dlogits, fd, kTolGrad, "d logits");
}

TEST_CASE("squared error loss and gradient match finite differences", "[models]") {
  const std::int64_t n = 12;
  TestRng rng(71);
  const std::vector<float> pred = rng.floats(n, -2.0, 2.0);
  const std::vector<float> target = rng.floats(n, -2.0, 2.0);
  const float scale = 1.0f / 3.0f;  // e.g. the mean over a batch of 3
  std::vector<float> dpred(static_cast<std::size_t>(n));
  const double sum =
      squared_error(ExecContext{}, pred.data(), target.data(), n, dpred.data(), scale);

  std::vector<double> p(pred.begin(), pred.end());
  const auto ref = [&] {
    double s = 0.0;
    for (std::size_t i = 0; i < p.size(); ++i) s += (p[i] - target[i]) * (p[i] - target[i]);
    return s;
  };
  CHECK(sum == Approx(ref()).epsilon(1e-5));
  std::vector<double> fd =
      central_differences(p, [&] { return ref() * static_cast<double>(scale); });
  check_close(dpred, fd, kTolGrad, "d pred");
}

}  // namespace zl::test
