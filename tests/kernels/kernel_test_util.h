// Helpers of the kernel tests: seeded random inputs and the element-wise comparison of a float
// kernel output with a double reference under the tolerance of docs/design.md ("Tolerances"):
// |got - ref| <= atol + |ref|*rtol.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace zl::test {

inline std::vector<float> random_floats(std::int64_t n, std::mt19937& rng, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Checks every element (NaN never passes) and reports the count and the worst offender, so one
// failure does not drown the log in thousands of lines.
inline void check_close(const float* got, const double* ref, std::int64_t n, double atol,
                        double rtol, const std::string& what) {
  std::int64_t bad = 0;
  std::int64_t worst = -1;
  double worst_ratio = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double tol = atol + std::abs(ref[i]) * rtol;
    const double err = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (!(err <= tol)) {
      ++bad;
      const double ratio = std::isnan(err) ? INFINITY : err / tol;
      if (worst < 0 || ratio > worst_ratio) {
        worst = i;
        worst_ratio = ratio;
      }
    }
  }
  if (bad != 0) {
    FAIL_CHECK(what << ": " << bad << " of " << n << " elements outside atol " << atol
                    << " + |ref| * rtol " << rtol << "; worst at [" << worst << "]: got "
                    << got[worst] << ", ref " << ref[worst]);
  } else {
    SUCCEED(what);
  }
}

inline void check_close(const std::vector<float>& got, const std::vector<double>& ref,
                        double atol, double rtol, const std::string& what) {
  REQUIRE(got.size() == ref.size());
  check_close(got.data(), ref.data(), static_cast<std::int64_t>(got.size()), atol, rtol, what);
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace zl::test
