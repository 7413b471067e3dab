// gemm against a naive double-precision triple loop: all four transpose combinations, padded row
// strides, alpha/beta (beta = 0 must overwrite even NaN, as the layers rely on), k = 0.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/errors.h"
#include "base/exec_context.h"
#include "kernels/gemm.h"
#include "kernel_test_util.h"

namespace {

using zl::Transpose;
using zl::test::check_close;
using zl::test::random_floats;

// Element (r, c) of op(X) for a stored row-major X with row stride ld.
double op_at(const std::vector<float>& x, Transpose t, std::int64_t ld, std::int64_t r,
             std::int64_t c) {
  return t == Transpose::No ? x[r * ld + c] : x[c * ld + r];
}

struct GemmShape {
  std::int64_t m, n, k;
};

}  // namespace

TEST_CASE("gemm matches the naive reference for every transpose combination",
          "[kernels][gemm]") {
  const zl::ExecContext cpu{};
  zl::set_cpu_gemm_threads(1);
  const GemmShape shapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 9, 33}, {64, 10, 70}, {2, 130, 3}};
  const std::pair<float, float> alpha_betas[] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}};
  for (const GemmShape& s : shapes) {
    for (const Transpose ta : {Transpose::No, Transpose::Yes}) {
      for (const Transpose tb : {Transpose::No, Transpose::Yes}) {
        for (const auto& [alpha, beta] : alpha_betas) {
          for (const std::int64_t pad : {0, 3}) {  // row strides larger than the rows
            std::mt19937 rng(static_cast<unsigned>(s.m * 10007 + s.n * 101 + s.k));
            // Stored shapes: A is (m, k) or, transposed, (k, m); B is (k, n) or (n, k).
            const std::int64_t a_rows = ta == Transpose::No ? s.m : s.k;
            const std::int64_t a_cols = ta == Transpose::No ? s.k : s.m;
            const std::int64_t b_rows = tb == Transpose::No ? s.k : s.n;
            const std::int64_t b_cols = tb == Transpose::No ? s.n : s.k;
            const std::int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = s.n + pad;
            const std::vector<float> a = random_floats(a_rows * lda, rng);
            const std::vector<float> b = random_floats(b_rows * ldb, rng);
            std::vector<float> c = random_floats(s.m * ldc, rng);
            if (beta == 0.0f) {
              // beta = 0 means "overwrite": C's old contents must not be read, not even NaN.
              std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
            }
            std::vector<double> ref(c.begin(), c.end());
            for (std::int64_t i = 0; i < s.m; ++i) {
              for (std::int64_t j = 0; j < s.n; ++j) {
                double acc = 0.0;
                for (std::int64_t p = 0; p < s.k; ++p) {
                  acc += op_at(a, ta, lda, i, p) * op_at(b, tb, ldb, p, j);
                }
                const double old = beta == 0.0f ? 0.0 : beta * static_cast<double>(c[i * ldc + j]);
                ref[i * ldc + j] = alpha * acc + old;
              }
            }
            zl::gemm(cpu, ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta,
                     c.data(), ldc);
            // Padding columns of C are outside the matrix: they must keep their old values.
            const std::string label =
                "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" +
                std::to_string(s.k) + " ta=" + (ta == Transpose::Yes ? "T" : "N") +
                " tb=" + (tb == Transpose::Yes ? "T" : "N") + " alpha=" + std::to_string(alpha) +
                " beta=" + std::to_string(beta) + " pad=" + std::to_string(pad);
            if (beta == 0.0f && pad > 0) {
              // NaN padding stays NaN; compare only the matrix part.
              for (std::int64_t i = 0; i < s.m; ++i) {
                check_close(&c[i * ldc], &ref[i * ldc], s.n, 1e-5, 1e-5,
                            label + " row " + std::to_string(i));
              }
            } else {
              check_close(c, ref, 1e-5, 1e-5, label);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("gemm edge cases: empty output, k = 0, bad arguments", "[kernels][gemm]") {
  const zl::ExecContext cpu{};
  const float* const none = nullptr;  // typed: gemm is overloaded on fp32 and bf16 operands
  // k = 0: op(A) * op(B) is zero, so C = beta * C (and beta = 0 clears even NaN).
  std::vector<float> c = {1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 4.0f};
  zl::gemm(cpu, Transpose::No, Transpose::No, 2, 2, 0, 1.0f, none, 0, none, 2, 0.0f,
           c.data(), 2);
  CHECK(c == std::vector<float>(4, 0.0f));
  c = {1.0f, 2.0f, 3.0f, 4.0f};
  zl::gemm(cpu, Transpose::No, Transpose::No, 2, 2, 0, 1.0f, none, 0, none, 2, 0.5f,
           c.data(), 2);
  CHECK(c == std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f});
  // m = 0 or n = 0: nothing to do, nothing touched.
  zl::gemm(cpu, Transpose::No, Transpose::No, 0, 2, 3, 1.0f, none, 3, none, 2, 0.0f,
           static_cast<float*>(nullptr), 2);
  // A row stride smaller than the stored row is a bug in the caller.
  std::vector<float> a(6, 1.0f), b(6, 1.0f);
  REQUIRE_THROWS_AS(zl::gemm(cpu, Transpose::No, Transpose::No, 2, 2, 3, 1.0f, a.data(), 2,
                             b.data(), 2, 0.0f, c.data(), 2),
                    zl::InternalError);
  REQUIRE_THROWS_AS(zl::set_cpu_gemm_threads(0), zl::UserError);
#if !defined(ZEROLAP_WITH_CUDA)
  const zl::ExecContext cuda{zl::DeviceKind::Cuda, nullptr, nullptr};
  REQUIRE_THROWS_WITH(zl::gemm(cuda, Transpose::No, Transpose::No, 2, 2, 3, 1.0f, a.data(), 3,
                               b.data(), 2, 0.0f, c.data(), 2),
                      Catch::Matchers::Contains("built without CUDA"));
#endif
}
