// Test support for the model tests: a plain double-precision reference of every layer, central
// finite differences over it, and the comparison `|a - r| <= atol + rtol * |r|` (docs/design.md, "Tolerances").
// Why a double reference: finite differences of the float32 kernels themselves would be limited
// by float rounding (~1e-7 / eps relative noise), so tolerances would have to be loose (~1e-2).
// Differentiating a double reference with h = 1e-5 has truncation error ~h^2 ~ 1e-10 and rounding
// error ~1e-16 / h ~ 1e-11, so the comparison measures only the float32 error of the analytic
// gradient itself, and the tolerance can be tight. The reference forward is also compared with
// the kernels' forward, so both describe the same function.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "base/device_buffer.h"
#include "kernels/elementwise.h"
#include "models/parameter_store.h"
#include "models/tensor.h"

namespace zl::test {

// A row-major double matrix.
struct Mat {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<double> v;
  Mat() = default;
  Mat(std::int64_t r, std::int64_t c) : rows(r), cols(c), v(static_cast<std::size_t>(r * c), 0.0) {}
  double& at(std::int64_t i, std::int64_t j) { return v[static_cast<std::size_t>(i * cols + j)]; }
  double at(std::int64_t i, std::int64_t j) const {
    return v[static_cast<std::size_t>(i * cols + j)];
  }
};

// Parameters by id, in double: P[id] has store.info(id).numel elements.
using Params = std::vector<std::vector<double>>;

// A small deterministic generator for test data (splitmix64 -> U(lo, hi)).
class TestRng {
 public:
  explicit TestRng(std::uint64_t seed) : state_(seed) {}
  double uniform(double lo, double hi) {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1.0p-53;
  }
  std::vector<float> floats(std::int64_t n, double lo, double hi) {
    std::vector<float> out(static_cast<std::size_t>(n));
    for (float& f : out) f = static_cast<float>(uniform(lo, hi));
    return out;
  }

 private:
  std::uint64_t state_;
};

inline std::vector<float> to_host(const float* src, DeviceKind device, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n));
  copy_to_host(src, device, out.data(), n);
  return out;
}

inline std::vector<float> to_host(const Tensor& t) { return to_host(t.f32(), t.device, t.numel()); }

inline Mat to_mat(const Tensor& t) {
  Mat m(t.rows, t.cols);
  std::vector<float> h = to_host(t);
  for (std::size_t i = 0; i < h.size(); ++i) m.v[i] = h[i];
  return m;
}

inline Params params_of(const ParameterStore& store) {
  Params p;
  for (int id = 0; id < store.count(); ++id) {
    std::vector<float> h = to_host(store.param_data(id), store.device(), store.info(id).numel);
    p.emplace_back(h.begin(), h.end());
  }
  return p;
}

// --- reference layers ---------------------------------------------------------------------------

inline double ref_activation(Activation act, double z) {
  switch (act) {
    case Activation::Identity:
      return z;
    case Activation::Relu:
      return z > 0.0 ? z : 0.0;
    case Activation::Tanh:
      return std::tanh(z);
    case Activation::Gelu: {
      const double k = std::sqrt(2.0 / 3.14159265358979323846);
      return 0.5 * z * (1.0 + std::tanh(k * (z + 0.044715 * z * z * z)));
    }
  }
  return z;
}

// y = act(x W^T + b), W (out, in) row-major.
inline Mat ref_linear(const Mat& x, const std::vector<double>& w, const std::vector<double>& b,
                      std::int64_t out, Activation act) {
  Mat y(x.rows, out);
  for (std::int64_t i = 0; i < x.rows; ++i) {
    for (std::int64_t o = 0; o < out; ++o) {
      double s = b[static_cast<std::size_t>(o)];
      for (std::int64_t k = 0; k < x.cols; ++k) {
        s += x.at(i, k) * w[static_cast<std::size_t>(o * x.cols + k)];
      }
      y.at(i, o) = ref_activation(act, s);
    }
  }
  return y;
}

// LayerNorm with the biased variance, as torch.nn.LayerNorm.
inline Mat ref_layernorm(const Mat& x, const std::vector<double>& gamma,
                         const std::vector<double>& beta, double eps) {
  Mat y(x.rows, x.cols);
  for (std::int64_t i = 0; i < x.rows; ++i) {
    double mean = 0.0, var = 0.0;
    for (std::int64_t j = 0; j < x.cols; ++j) mean += x.at(i, j);
    mean /= static_cast<double>(x.cols);
    for (std::int64_t j = 0; j < x.cols; ++j) var += (x.at(i, j) - mean) * (x.at(i, j) - mean);
    var /= static_cast<double>(x.cols);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (std::int64_t j = 0; j < x.cols; ++j) {
      y.at(i, j) = (x.at(i, j) - mean) * rstd * gamma[static_cast<std::size_t>(j)] +
                   beta[static_cast<std::size_t>(j)];
    }
  }
  return y;
}

inline Mat ref_add(const Mat& a, const Mat& b) {
  Mat y = a;
  for (std::size_t i = 0; i < y.v.size(); ++i) y.v[i] += b.v[i];
  return y;
}

// sum(probe * y): a scalar "loss" whose gradient with respect to y is exactly `probe`.
inline double probe_loss(const Mat& y, const std::vector<float>& probe) {
  double s = 0.0;
  for (std::size_t i = 0; i < y.v.size(); ++i) s += y.v[i] * probe[i];
  return s;
}

// --- finite differences and comparison ----------------------------------------------------------

constexpr double kFdStep = 1e-5;

// d f / d v[i] for every i by central differences; v is restored afterwards.
inline std::vector<double> central_differences(std::vector<double>& v,
                                               const std::function<double()>& f) {
  std::vector<double> g(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double saved = v[i];
    v[i] = saved + kFdStep;
    const double plus = f();
    v[i] = saved - kFdStep;
    const double minus = f();
    v[i] = saved;
    g[i] = (plus - minus) / (2.0 * kFdStep);
  }
  return g;
}

struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

// Every element within atol + rtol * |ref|; reports the worst element on failure. Also requires
// the reference not to be identically zero, so the check cannot pass vacuously.
inline void check_close(const std::vector<float>& actual, const std::vector<double>& ref,
                        Tolerance tol, const std::string& what) {
  REQUIRE(actual.size() == ref.size());
  double worst_excess = -std::numeric_limits<double>::infinity();
  std::size_t worst = 0;
  double ref_max = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double err = std::abs(static_cast<double>(actual[i]) - ref[i]);
    const double excess = std::isfinite(err) ? err - (tol.atol + tol.rtol * std::abs(ref[i]))
                                             : std::numeric_limits<double>::infinity();
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
    ref_max = std::max(ref_max, std::abs(ref[i]));
  }
  INFO(what << ": worst element " << worst << " actual " << actual[worst] << " reference "
            << ref[worst] << " (atol " << tol.atol << ", rtol " << tol.rtol << ")");
  CHECK(worst_excess <= 0.0);
  CHECK(ref_max > 1e-3);
}

inline void check_close(const std::vector<float>& actual, const Mat& ref, Tolerance tol,
                        const std::string& what) {
  check_close(actual, ref.v, tol, what);
}

}  // namespace zl::test
