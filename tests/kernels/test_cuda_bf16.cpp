// The bf16 CUDA kernels against the CPU's bf16 kernels (which test_elementwise_bf16.cpp ties to
// the fp32 kernels), on identical bf16 inputs, and the bf16 and TF32 GEMMs against the CPU GEMM.
// Tolerance: both sides compute the same fp32 formula and round once to bf16; the CUDA and glibc
// math functions (expf, tanhf) and a different summation order differ by a few fp32 ulps, which
// after rounding is at most one bf16 ulp: |gpu - cpu| <= 2^-7 |cpu| (+ a small atol where a sum
// cancels to near zero). fp32 outputs (parameter gradients, statistics, losses) use the fp32 tests'
// tolerances. Built only with CUDA; skips with a printed reason where no GPU is visible.
#include <catch2/catch.hpp>

#include "cuda_test_util.h"

#if defined(ZEROLAP_WITH_CUDA)

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/bf16.h"
#include "base/device_buffer.h"
#include "base/exec_context.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernel_test_util.h"

namespace {

using zl::Accumulate;
using zl::Activation;
using zl::Bf16;
using zl::DeviceBuffer;
using zl::DeviceKind;
using zl::DType;
using zl::Transpose;

using zl::test::CudaEnv;

template <class T>
DeviceBuffer upload(const std::vector<T>& host) {
  const auto n = static_cast<std::int64_t>(host.size());
  DeviceBuffer buf(DeviceKind::Cuda, n, zl::dtype_of<T>);
  zl::copy_from_host(host.data(), buf.data<T>(), DeviceKind::Cuda, n);
  return buf;
}

template <class T>
std::vector<T> download(const CudaEnv& env, const DeviceBuffer& buf) {
  env.sync();
  std::vector<T> host(static_cast<std::size_t>(buf.size()));
  zl::copy_to_host(buf.data<T>(), DeviceKind::Cuda, host.data(), buf.size());
  return host;
}

std::vector<Bf16> random_bf16(std::int64_t n, std::mt19937& rng, float lo = -1.0f,
                              float hi = 1.0f) {
  const std::vector<float> f = zl::test::random_floats(n, rng, lo, hi);
  std::vector<Bf16> out(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) out[i] = zl::float_to_bf16(f[i]);
  return out;
}

std::vector<float> widen(const std::vector<Bf16>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = zl::bf16_to_float(v[i]);
  return out;
}

// Within one bf16 ulp (2^-7 relative) plus atol.
void check_bf16(const std::vector<Bf16>& gpu, const std::vector<Bf16>& cpu, double atol,
                const std::string& what) {
  zl::test::check_close(widen(gpu), zl::test::to_double(widen(cpu)), atol, 1.0 / 128.0, what);
}

}  // namespace

TEST_CASE("CUDA bf16 activations match the CPU's bf16", "[cuda][kernels][bf16]") {
  if (!zl::test::cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  const std::int64_t rows = 67, cols = 45, n = rows * cols;
  std::mt19937 rng(7);
  const std::vector<Bf16> x = random_bf16(n, rng, -3.0f, 3.0f), bias = random_bf16(cols, rng),
                          dy = random_bf16(n, rng);
  for (const Activation act :
       {Activation::Identity, Activation::Relu, Activation::Gelu, Activation::Tanh}) {
    const std::string name = "act " + std::to_string(static_cast<int>(act));
    std::vector<Bf16> y(n), dx(n);
    zl::bias_activation_forward(cpu, act, x.data(), bias.data(), y.data(), rows, cols);
    zl::activation_backward(cpu, act, x.data(), dy.data(), dx.data(), n);
    const DeviceBuffer gx = upload(x), gb = upload(bias), gdy = upload(dy);
    const DeviceBuffer gy(DeviceKind::Cuda, n, DType::BF16), gdx(DeviceKind::Cuda, n, DType::BF16);
    zl::bias_activation_forward(env.ctx(), act, gx.data<Bf16>(), gb.data<Bf16>(), gy.data<Bf16>(),
                                rows, cols);
    zl::activation_backward(env.ctx(), act, gx.data<Bf16>(), gdy.data<Bf16>(), gdx.data<Bf16>(),
                            n);
    check_bf16(download<Bf16>(env, gy), y, 1e-6, name + " forward");
    check_bf16(download<Bf16>(env, gdx), dx, 1e-6, name + " backward");
  }
}

TEST_CASE("CUDA bf16 bias_backward, add, scale, casts match the CPU", "[cuda][kernels][bf16]") {
  if (!zl::test::cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  const std::int64_t rows = 700, cols = 33, n = rows * cols;  // two column-sum chunks
  std::mt19937 rng(3);
  const std::vector<Bf16> a = random_bf16(n, rng), b = random_bf16(n, rng);
  const DeviceBuffer ga = upload(a), gb = upload(b);
  for (const Accumulate acc : {Accumulate::Overwrite, Accumulate::Add}) {
    std::vector<float> db(cols, 0.5f);
    zl::bias_backward(cpu, a.data(), db.data(), rows, cols, acc);
    DeviceBuffer gdb = upload(std::vector<float>(cols, 0.5f));
    zl::bias_backward(env.ctx(), ga.data<Bf16>(), gdb.data(), rows, cols, acc);
    zl::test::check_close(download<float>(env, gdb), zl::test::to_double(db),
                          1e-6 * rows + 1e-6, 1e-5, "bias_backward");
  }
  std::vector<Bf16> sum(n);
  zl::add(cpu, a.data(), b.data(), sum.data(), n);
  const DeviceBuffer gsum(DeviceKind::Cuda, n, DType::BF16);
  zl::add(env.ctx(), ga.data<Bf16>(), gb.data<Bf16>(), gsum.data<Bf16>(), n);
  check_bf16(download<Bf16>(env, gsum), sum, 0.0, "add");  // exact: the same one rounding
  std::vector<Bf16> scaled = a;
  zl::scale(cpu, scaled.data(), n, 0.3f);
  DeviceBuffer gscaled = upload(a);
  zl::scale(env.ctx(), gscaled.data<Bf16>(), n, 0.3f);
  check_bf16(download<Bf16>(env, gscaled), scaled, 0.0, "scale");
  const std::vector<float> f = zl::test::random_floats(n, rng);
  std::vector<Bf16> f16(n);
  zl::cast(cpu, f.data(), f16.data(), n);
  const DeviceBuffer gf = upload(f), gf16(DeviceKind::Cuda, n, DType::BF16),
                     gback(DeviceKind::Cuda, n, DType::F32);
  zl::cast(env.ctx(), gf.data(), gf16.data<Bf16>(), n);
  zl::cast(env.ctx(), gf16.data<Bf16>(), gback.data(), n);
  const std::vector<Bf16> got16 = download<Bf16>(env, gf16);
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < n; ++i) differ += got16[i].bits != f16[i].bits ? 1 : 0;
  CHECK(differ == 0);  // the same integer rounding on both sides: bitwise
  CHECK(download<float>(env, gback) == widen(f16));
  CHECK(std::fabs(zl::sum_of_squares(env.ctx(), ga.data<Bf16>(), n) -
                  zl::sum_of_squares(cpu, a.data(), n)) <=
        1e-12 * zl::sum_of_squares(cpu, a.data(), n));
}

TEST_CASE("CUDA bf16 layernorm matches the CPU's bf16", "[cuda][kernels][bf16]") {
  if (!zl::test::cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  const std::int64_t rows = 600, cols = 96, n = rows * cols;
  std::mt19937 rng(9);
  const std::vector<Bf16> x = random_bf16(n, rng, -2.0f, 3.0f), gamma = random_bf16(cols, rng),
                          beta = random_bf16(cols, rng), dy = random_bf16(n, rng);
  std::vector<Bf16> y(n), dx(n);
  std::vector<float> mean(rows), rstd(rows), dgamma(cols), dbeta(cols);
  zl::layernorm_forward(cpu, x.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                        rstd.data(), rows, cols, 1e-5f);
  zl::layernorm_backward(cpu, x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(),
                         dx.data(), dgamma.data(), dbeta.data(), rows, cols, Accumulate::Overwrite);
  const DeviceBuffer gx = upload(x), gg = upload(gamma), gbt = upload(beta), gdy = upload(dy);
  const DeviceBuffer gy(DeviceKind::Cuda, n, DType::BF16), gdx(DeviceKind::Cuda, n, DType::BF16),
      gmean(DeviceKind::Cuda, rows), grstd(DeviceKind::Cuda, rows), gdg(DeviceKind::Cuda, cols),
      gdb(DeviceKind::Cuda, cols);
  zl::layernorm_forward(env.ctx(), gx.data<Bf16>(), gg.data<Bf16>(), gbt.data<Bf16>(),
                        gy.data<Bf16>(), gmean.data(), grstd.data(), rows, cols, 1e-5f);
  zl::layernorm_backward(env.ctx(), gx.data<Bf16>(), gg.data<Bf16>(), gmean.data(), grstd.data(),
                         gdy.data<Bf16>(), gdx.data<Bf16>(), gdg.data(), gdb.data(), rows, cols,
                         Accumulate::Overwrite);
  check_bf16(download<Bf16>(env, gy), y, 1e-2, "layernorm y");
  zl::test::check_close(download<float>(env, gmean), zl::test::to_double(mean), 1e-6, 1e-6, "mean");
  zl::test::check_close(download<float>(env, grstd), zl::test::to_double(rstd), 1e-6, 1e-5, "rstd");
  check_bf16(download<Bf16>(env, gdx), dx, 1e-2, "layernorm dx");
  zl::test::check_close(download<float>(env, gdg), zl::test::to_double(dgamma), 1e-6 * rows,
                        1e-5, "dgamma");
  zl::test::check_close(download<float>(env, gdb), zl::test::to_double(dbeta), 1e-6 * rows, 1e-5,
                        "dbeta");
}

TEST_CASE("CUDA bf16 losses match the CPU's bf16", "[cuda][kernels][bf16]") {
  if (!zl::test::cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  const std::int64_t rows = 300, cols = 10, n = rows * cols;
  std::mt19937 rng(13);
  const std::vector<Bf16> logits = random_bf16(n, rng, -4.0f, 4.0f);
  std::vector<std::int32_t> labels(rows);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng() % cols);
  std::vector<Bf16> d(n);
  std::int64_t correct = 0, gcorrect = 0;
  const double loss = zl::softmax_cross_entropy(cpu, logits.data(), labels.data(), rows, cols,
                                                d.data(), 1.0f / rows, &correct);
  const DeviceBuffer gl = upload(logits), gd(DeviceKind::Cuda, n, DType::BF16);
  DeviceBuffer glabels(DeviceKind::Cuda, rows);  // int32 labels in a 4-byte buffer
  zl::copy_bytes_from_host(labels.data(), glabels.raw(), DeviceKind::Cuda, rows * 4);
  const double gloss = zl::softmax_cross_entropy(
      env.ctx(), gl.data<Bf16>(), static_cast<const std::int32_t*>(glabels.raw()), rows, cols,
      gd.data<Bf16>(), 1.0f / rows, &gcorrect);
  CHECK(std::fabs(gloss - loss) <= 1e-5 * std::fabs(loss));
  CHECK(gcorrect == correct);
  check_bf16(download<Bf16>(env, gd), d, 1e-6, "dlogits");
  const std::vector<float> target = zl::test::random_floats(n, rng);
  std::vector<Bf16> dp(n);
  const double se = zl::squared_error(cpu, logits.data(), target.data(), n, dp.data(), 0.5f);
  const DeviceBuffer gt = upload(target), gdp(DeviceKind::Cuda, n, DType::BF16);
  const double gse =
      zl::squared_error(env.ctx(), gl.data<Bf16>(), gt.data(), n, gdp.data<Bf16>(), 0.5f);
  CHECK(std::fabs(gse - se) <= 1e-9 * se);
  check_bf16(download<Bf16>(env, gdp), dp, 0.0, "dpred");
}

TEST_CASE("CUDA bf16 device loss sums and gradient norm match the CPU's bf16",
          "[cuda][kernels][bf16]") {
  if (!zl::test::cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  const std::int64_t rows = 300, cols = 10, n = rows * cols;
  std::mt19937 rng(17);
  const std::vector<Bf16> logits = random_bf16(n, rng, -4.0f, 4.0f);
  std::vector<std::int32_t> labels(rows);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng() % cols);
  double sums[zl::kLossSumCount] = {};
  std::vector<Bf16> d(n);
  zl::softmax_cross_entropy_accumulate(cpu, logits.data(), labels.data(), rows, cols, d.data(),
                                       1.0f / rows, sums);
  const DeviceBuffer gl = upload(logits), gd(DeviceKind::Cuda, n, DType::BF16);
  DeviceBuffer glabels(DeviceKind::Cuda, rows);  // int32 labels in a 4-byte buffer
  zl::copy_bytes_from_host(labels.data(), glabels.raw(), DeviceKind::Cuda, rows * 4);
  DeviceBuffer gsums(DeviceKind::Cuda, 2 * zl::kLossSumCount);  // doubles in a float buffer
  auto* device_sums = reinterpret_cast<double*>(gsums.data());
  zl::softmax_cross_entropy_accumulate(env.ctx(), gl.data<Bf16>(),
                                       static_cast<const std::int32_t*>(glabels.raw()), rows,
                                       cols, gd.data<Bf16>(), 1.0f / rows, device_sums);
  const std::vector<float> target = zl::test::random_floats(n, rng);
  std::vector<Bf16> dp(n);
  double se[1] = {0.0};
  zl::squared_error_accumulate(cpu, logits.data(), target.data(), n, dp.data(), 0.5f, 2.0, se);
  const DeviceBuffer gt = upload(target), gdp(DeviceKind::Cuda, n, DType::BF16);
  DeviceBuffer gse(DeviceKind::Cuda, 2);
  auto* device_se = reinterpret_cast<double*>(gse.data());
  zl::squared_error_accumulate(env.ctx(), gl.data<Bf16>(), gt.data(), n, gdp.data<Bf16>(), 0.5f,
                               2.0, device_se);
  double host[zl::kLossSumCount] = {}, host_se[1] = {};
  zl::take_device_sums(env.ctx(), device_sums, host, zl::kLossSumCount);
  zl::take_device_sums(env.ctx(), device_se, host_se, 1);
  CHECK(std::fabs(host[0] - sums[0]) <= 1e-5 * std::fabs(sums[0]));
  CHECK(host[1] == sums[1]);
  CHECK(host[2] == 0.0);
  CHECK(std::fabs(host_se[0] - se[0]) <= 1e-9 * se[0]);
  check_bf16(download<Bf16>(env, gd), d, 1e-6, "dlogits");
  check_bf16(download<Bf16>(env, gdp), dp, 0.0, "dpred");
  const std::vector<zl::ReadSpan<Bf16>> spans = {{logits.data(), 1000},
                                                 {logits.data() + 1000, n - 1000}};
  const std::vector<zl::ReadSpan<Bf16>> gspans = {{gl.data<Bf16>(), 1000},
                                                  {gl.data<Bf16>() + 1000, n - 1000}};
  const double norm = zl::total_sum_of_squares(cpu, spans.data(), 2);
  CHECK(zl::total_sum_of_squares(env.ctx(), gspans.data(), 2) == Approx(norm).epsilon(1e-12));
}

TEST_CASE("CUDA bf16 and TF32 gemms match the CPU", "[cuda][kernels][bf16]") {
  if (!zl::test::cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  std::mt19937 rng(5);
  const std::int64_t m = 70, n = 90, k = 130;
  for (const Transpose ta : {Transpose::No, Transpose::Yes}) {
    for (const Transpose tb : {Transpose::No, Transpose::Yes}) {
      const std::string label = std::string("ta=") + (ta == Transpose::Yes ? "T" : "N") +
                                " tb=" + (tb == Transpose::Yes ? "T" : "N");
      const std::int64_t lda = ta == Transpose::No ? k : m, ldb = tb == Transpose::No ? n : k;
      const std::vector<Bf16> a = random_bf16(m * k, rng), b = random_bf16(k * n, rng);
      const std::vector<float> c0 = zl::test::random_floats(m * n, rng);
      const DeviceBuffer ga = upload(a), gb = upload(b);
      // fp32 C with beta = 1 (gradient accumulation): sums of k products of numbers <= 1.
      std::vector<float> c = c0;
      zl::gemm(cpu, ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 1.0f, c.data(), n);
      DeviceBuffer gc = upload(c0);
      zl::gemm(env.ctx(), ta, tb, m, n, k, 1.0f, ga.data<Bf16>(), lda, gb.data<Bf16>(), ldb, 1.0f,
               gc.data(), n);
      zl::test::check_close(download<float>(env, gc), zl::test::to_double(c), 1e-5 * k, 1e-5,
                            label + " bf16 -> fp32");
      // bf16 C, overwritten.
      std::vector<Bf16> c16(m * n);
      zl::gemm(cpu, ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c16.data(), n);
      const DeviceBuffer gc16(DeviceKind::Cuda, m * n, DType::BF16);
      zl::gemm(env.ctx(), ta, tb, m, n, k, 1.0f, ga.data<Bf16>(), lda, gb.data<Bf16>(), ldb, 0.0f,
               gc16.data<Bf16>(), n);
      check_bf16(download<Bf16>(env, gc16), c16, 1e-5 * k, label + " bf16 -> bf16");
    }
  }
  // TF32: inputs rounded to a 10-bit mantissa (relative error <= 2^-11 each), fp32 accumulation.
  const std::vector<float> a = zl::test::random_floats(m * k, rng),
                           b = zl::test::random_floats(k * n, rng);
  std::vector<float> c(m * n);
  zl::gemm(cpu, Transpose::No, Transpose::No, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f,
           c.data(), n);
  zl::ExecContext tf32 = env.ctx();
  tf32.gemm_math = zl::GemmMath::Tf32;
  const DeviceBuffer ga = upload(a), gb = upload(b), gc(DeviceKind::Cuda, m * n);
  zl::gemm(tf32, Transpose::No, Transpose::No, m, n, k, 1.0f, ga.data(), k, gb.data(), n, 0.0f,
           gc.data(), n);
  // |error| <= 2 * 2^-11 * sum_p |a b| <= 2^-10 * k for entries <= 1 (first order).
  zl::test::check_close(download<float>(env, gc), zl::test::to_double(c),
                        std::ldexp(1.0, -10) * k, 0.0, "tf32");
}

#else

TEST_CASE("CUDA bf16 kernel tests are not built", "[cuda]") {
  WARN("built without CUDA (ZEROLAP_CUDA=OFF or nvcc not found): CUDA bf16 tests skipped");
}

#endif  // ZEROLAP_WITH_CUDA
