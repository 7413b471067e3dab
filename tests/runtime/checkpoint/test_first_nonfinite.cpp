// first_nonfinite (runtime/checkpoint/checkpoint_internal.h), the check that keeps a diverged
// run's values out of every checkpoint: it finds the first NaN or infinity wherever it sits in
// its block of the vectorized pass, and nothing in finite data (the largest finite float, -0,
// subnormals).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/checkpoint/checkpoint_internal.h"

using zl::first_nonfinite;

TEST_CASE("first_nonfinite finds the first NaN or infinity at any position", "[checkpoint]") {
  const float kInf = std::numeric_limits<float>::infinity();
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values(3 * 4096 + 17, 1.5f);
  values[1] = std::numeric_limits<float>::max();
  values[2] = -0.0f;
  values[3] = std::numeric_limits<float>::denorm_min();
  values[4] = -std::numeric_limits<float>::max();
  CHECK(first_nonfinite(values.data(), static_cast<std::int64_t>(values.size())) == -1);
  CHECK(first_nonfinite(values.data(), 0) == -1);
  for (const std::int64_t at : {0, 5, 4095, 4096, 4097, 8191, 3 * 4096 + 16}) {
    for (const float bad : {kNaN, kInf, -kInf}) {
      std::vector<float> v = values;
      v[static_cast<std::size_t>(at)] = bad;
      const auto later = static_cast<std::size_t>(at + 100);  // a second one, after it
      if (later < v.size()) v[later] = kNaN;
      INFO("at " << at << " value " << bad);
      CHECK(first_nonfinite(v.data(), static_cast<std::int64_t>(v.size())) == at);
      CHECK(first_nonfinite(v.data(), at) == -1);  // before it, all finite
    }
  }
}
