// The bf16 GEMM (bf16 A and B, fp32 accumulation, fp32 or bf16 C; oneDNN on the CPU) against a
// double-precision reference over the same bf16 inputs: every transpose combination, padded
// strides, alpha/beta, beta = 0 overwriting NaN, k = 0; on the path this CPU takes and, forced,
// through fp32 (Note [bf16 GEMM through fp32]), so that path is tested on every CPU. And the fp32
// GEMM with ctx.gemm_math = Tf32 on the CPU is the plain fp32 GEMM, bit for bit.
//
// Tolerance, per element: the inputs are exact bf16 values, so products are exact in fp32 and the
// only fp32 error is the k-term summation: |err| <= k * 2^-23 * sum_p |a_ip b_pj| (first-order
// bound, doubled for alpha/beta scaling and blocking order). A bf16 C adds one rounding to nearest:
// at most 2^-8 * |ref| (bf16's unit roundoff: 8 significant bits); the bf16 C read back with
// beta != 0 is exact (it was stored as bf16).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "base/bf16.h"
#include "base/exec_context.h"
#include "kernels/gemm.h"
#include "kernel_test_util.h"

namespace {

using zl::Bf16;
using zl::Transpose;

std::vector<Bf16> random_bf16(std::int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<Bf16> v(static_cast<std::size_t>(n));
  for (Bf16& x : v) x = zl::float_to_bf16(dist(rng));
  return v;
}

double at(const std::vector<Bf16>& x, Transpose t, std::int64_t ld, std::int64_t r,
          std::int64_t c) {
  return zl::bf16_to_float(t == Transpose::No ? x[r * ld + c] : x[c * ld + r]);
}

float as_float(float v) { return v; }
float as_float(Bf16 v) { return zl::bf16_to_float(v); }
template <class T>
T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return zl::float_to_bf16(v);
  }
}

// Runs the bf16 GEMMs through fp32 while it lives, even where oneDNN has a bf16 matmul.
struct ThroughFp32 {
  ThroughFp32() { zl::force_cpu_gemm_bf16_through_fp32(true); }
  ~ThroughFp32() { zl::force_cpu_gemm_bf16_through_fp32(false); }
  ThroughFp32(const ThroughFp32&) = delete;
  ThroughFp32& operator=(const ThroughFp32&) = delete;
};

template <class TC>
void check_bf16_gemm(const std::string& out_name) {
  const zl::ExecContext cpu{};
  zl::set_cpu_gemm_threads(1);
  struct Shape {
    std::int64_t m, n, k;
  };
  const Shape shapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 9, 33}, {64, 10, 70}, {2, 130, 3}, {33, 65, 129}};
  const std::pair<float, float> alpha_betas[] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {-2.0f, 0.25f}};
  std::int64_t cases = 0;
  for (const Shape& s : shapes) {
    for (const Transpose ta : {Transpose::No, Transpose::Yes}) {
      for (const Transpose tb : {Transpose::No, Transpose::Yes}) {
        for (const auto& [alpha, beta] : alpha_betas) {
          for (const std::int64_t pad : {0, 3}) {
            std::mt19937 rng(static_cast<unsigned>(s.m * 7919 + s.n * 31 + s.k + pad));
            const std::int64_t a_rows = ta == Transpose::No ? s.m : s.k;
            const std::int64_t a_cols = ta == Transpose::No ? s.k : s.m;
            const std::int64_t b_rows = tb == Transpose::No ? s.k : s.n;
            const std::int64_t b_cols = tb == Transpose::No ? s.n : s.k;
            const std::int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = s.n + pad;
            const std::vector<Bf16> a = random_bf16(a_rows * lda, rng);
            const std::vector<Bf16> b = random_bf16(b_rows * ldb, rng);
            std::vector<TC> c(static_cast<std::size_t>(s.m * ldc));
            std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
            for (TC& x : c) {
              x = from_float<TC>(beta == 0.0f ? std::numeric_limits<float>::quiet_NaN()
                                              : dist(rng));
            }
            const std::vector<TC> before = c;
            zl::gemm(cpu, ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta,
                     c.data(), ldc);
            const std::string label = out_name + " m=" + std::to_string(s.m) +
                                      " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
                                      " ta=" + (ta == Transpose::Yes ? "T" : "N") +
                                      " tb=" + (tb == Transpose::Yes ? "T" : "N") +
                                      " alpha=" + std::to_string(alpha) +
                                      " beta=" + std::to_string(beta) + " pad=" + std::to_string(pad);
            std::int64_t bad = 0;
            std::string first;
            for (std::int64_t i = 0; i < s.m; ++i) {
              for (std::int64_t j = 0; j < ldc; ++j) {
                const float got = as_float(c[i * ldc + j]);
                if (j >= s.n) {  // padding: untouched
                  const float old = as_float(before[i * ldc + j]);
                  if (!(got == old || (std::isnan(got) && std::isnan(old)))) ++bad;
                  continue;
                }
                double acc = 0.0, mag = 0.0;
                for (std::int64_t p = 0; p < s.k; ++p) {
                  const double prod = at(a, ta, lda, i, p) * at(b, tb, ldb, p, j);
                  acc += prod;
                  mag += std::fabs(prod);
                }
                const double old = beta == 0.0f ? 0.0 : beta * as_float(before[i * ldc + j]);
                const double ref = alpha * acc + old;
                double tol = 2.0 * (static_cast<double>(s.k) + 2.0) * std::ldexp(1.0, -23) *
                             (std::fabs(alpha) * mag + std::fabs(old));
                if constexpr (std::is_same_v<TC, Bf16>) tol += std::ldexp(std::fabs(ref), -8);
                if (!(std::fabs(got - ref) <= tol)) {
                  if (bad++ == 0) {
                    first = "[" + std::to_string(i) + "," + std::to_string(j) + "] got " +
                            std::to_string(got) + " ref " + std::to_string(ref);
                  }
                }
              }
            }
            INFO(label << ": " << first);
            CHECK(bad == 0);
            ++cases;
          }
        }
      }
    }
  }
  CHECK(cases == 6 * 4 * 3 * 2);
}

}  // namespace

TEST_CASE("bf16 gemm with an fp32 C matches the reference over the same bf16 inputs",
          "[kernels][gemm][bf16]") {
  check_bf16_gemm<float>("C fp32");
}

TEST_CASE("bf16 gemm with a bf16 C is the fp32 result rounded once", "[kernels][gemm][bf16]") {
  check_bf16_gemm<Bf16>("C bf16");
}

namespace {

void check_k0_and_empty() {
  const zl::ExecContext cpu{};
  const Bf16* const none = nullptr;
  std::vector<Bf16> c = {zl::float_to_bf16(1.0f), zl::float_to_bf16(3.0f),
                         zl::float_to_bf16(NAN), zl::float_to_bf16(-2.0f)};
  zl::gemm(cpu, Transpose::No, Transpose::No, 2, 2, 0, 1.0f, none, 0, none, 2, 0.5f, c.data(), 2);
  CHECK(as_float(c[0]) == 0.5f);
  CHECK(as_float(c[1]) == 1.5f);
  CHECK(std::isnan(as_float(c[2])));
  CHECK(as_float(c[3]) == -1.0f);
  zl::gemm(cpu, Transpose::No, Transpose::No, 2, 2, 0, 1.0f, none, 0, none, 2, 0.0f, c.data(), 2);
  for (const Bf16 v : c) CHECK(v.bits == 0);
  std::vector<float> f = {NAN, 2.0f};
  zl::gemm(cpu, Transpose::No, Transpose::No, 1, 2, 0, 1.0f, none, 0, none, 2, 0.0f, f.data(), 2);
  CHECK(f == std::vector<float>{0.0f, 0.0f});
  zl::gemm(cpu, Transpose::No, Transpose::No, 0, 2, 3, 1.0f, none, 3, none, 2, 0.0f,
           static_cast<Bf16*>(nullptr), 2);
}

}  // namespace

TEST_CASE("bf16 gemm: k = 0 scales C, m = 0 touches nothing", "[kernels][gemm][bf16]") {
  check_k0_and_empty();
}

TEST_CASE("bf16 gemm through fp32 matches the same reference, fp32 and bf16 C",
          "[kernels][gemm][bf16]") {
  // The path a CPU without a bf16 matmul takes, forced here so an AVX-512 machine tests it too.
  CHECK(zl::cpu_gemm_bf16_path() ==
        (zl::cpu_gemm_bf16_native() ? zl::CpuBf16Gemm::Native : zl::CpuBf16Gemm::ThroughFp32));
  const ThroughFp32 forced;
  CHECK(zl::cpu_gemm_bf16_path() == zl::CpuBf16Gemm::ThroughFp32);
  check_bf16_gemm<float>("through fp32, C fp32");
  check_bf16_gemm<Bf16>("through fp32, C bf16");
  check_k0_and_empty();
}

TEST_CASE("bf16 gemm through fp32 is the fp32 gemm of the widened inputs, bit for bit",
          "[kernels][gemm][bf16]") {
  // Widening is exact, so the result is the fp32 GEMM's on the widened values; a bf16 C is that
  // rounded once, with a beta != 0 reading the bf16 C widened. On 2 threads, so the widening is
  // split across the team (33 x 4100 > 2 chunks of 2^16 elements).
  const ThroughFp32 forced;
  zl::set_cpu_gemm_threads(2);
  const zl::ExecContext cpu{};
  const std::int64_t m = 33, n = 40, k = 4100;
  std::mt19937 rng(11);
  const std::vector<Bf16> a = random_bf16(m * k, rng), b = random_bf16(n * k, rng);
  const std::vector<Bf16> c0 = random_bf16(m * n, rng);
  std::vector<float> wa(a.size()), wb(b.size()), wc(c0.size());
  for (std::size_t i = 0; i < a.size(); ++i) wa[i] = zl::bf16_to_float(a[i]);
  for (std::size_t i = 0; i < b.size(); ++i) wb[i] = zl::bf16_to_float(b[i]);
  for (std::size_t i = 0; i < c0.size(); ++i) wc[i] = zl::bf16_to_float(c0[i]);
  std::vector<float> want_f(static_cast<std::size_t>(m * n));
  zl::gemm(cpu, Transpose::No, Transpose::Yes, m, n, k, 0.5f, wa.data(), k, wb.data(), k, 0.0f,
           want_f.data(), n);
  std::vector<float> got_f(want_f.size(), std::numeric_limits<float>::quiet_NaN());
  zl::gemm(cpu, Transpose::No, Transpose::Yes, m, n, k, 0.5f, a.data(), k, b.data(), k, 0.0f,
           got_f.data(), n);
  CHECK(got_f == want_f);
  zl::gemm(cpu, Transpose::No, Transpose::Yes, m, n, k, 0.5f, wa.data(), k, wb.data(), k, 1.0f,
           wc.data(), n);
  std::vector<Bf16> got_h = c0;
  zl::gemm(cpu, Transpose::No, Transpose::Yes, m, n, k, 0.5f, a.data(), k, b.data(), k, 1.0f,
           got_h.data(), n);
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < got_h.size(); ++i) {
    differ += got_h[i].bits != zl::float_to_bf16(wc[i]).bits;
  }
  CHECK(differ == 0);
  zl::set_cpu_gemm_threads(1);
}

TEST_CASE("tf32 gemm math on the CPU is plain fp32, bit for bit", "[kernels][gemm]") {
  zl::ExecContext fp32{};
  zl::ExecContext tf32{};
  tf32.gemm_math = zl::GemmMath::Tf32;
  std::mt19937 rng(3);
  const std::vector<float> a = zl::test::random_floats(37 * 29, rng);
  const std::vector<float> b = zl::test::random_floats(29 * 41, rng);
  std::vector<float> c1(37 * 41), c2(37 * 41);
  zl::gemm(fp32, Transpose::No, Transpose::No, 37, 41, 29, 1.0f, a.data(), 29, b.data(), 41, 0.0f,
           c1.data(), 41);
  zl::gemm(tf32, Transpose::No, Transpose::No, 37, 41, 29, 1.0f, a.data(), 29, b.data(), 41, 0.0f,
           c2.data(), 41);
  CHECK(c1 == c2);
}
