// The CUDA kernels against their CPU twins (which have their own reference tests): every kernel
// goes through its dispatcher with a Cuda ExecContext on random data and is compared element-wise
// under atol + |ref|*rtol; reductions are also checked to be bitwise reproducible run to run.
// Built only with CUDA. Where no GPU is visible each case skips with a printed reason (WARN): a
// CUDA build on a machine without a GPU is absent-by-design, not a failure.
#include <catch2/catch.hpp>

#include "cuda_test_util.h"

#if defined(ZEROLAP_WITH_CUDA)

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/device_buffer.h"
#include "kernels/elementwise.h"
#include "base/errors.h"
#include "base/exec_context.h"
#include "kernels/gemm.h"
#include "kernels/optimizer_kernels.h"
#include "kernel_test_util.h"

namespace {

using zl::Accumulate;
using zl::Activation;
using zl::DeviceBuffer;
using zl::DeviceKind;
using zl::Transpose;
using zl::test::check_close;
using zl::test::random_floats;
using zl::test::cuda_device_visible;
using zl::test::to_double;

using zl::test::CudaEnv;

// A typed null: gemm and the kernels are overloaded / templated on fp32 and bf16 operands.
constexpr const float* kNoFloats = nullptr;

std::int64_t size_of(const std::vector<float>& v) { return static_cast<std::int64_t>(v.size()); }

DeviceBuffer upload(const std::vector<float>& host) {
  DeviceBuffer buf(DeviceKind::Cuda, size_of(host));
  zl::copy_from_host(host.data(), buf.data(), DeviceKind::Cuda, size_of(host));
  return buf;
}

void upload_into(const std::vector<float>& host, DeviceBuffer& buf) {
  REQUIRE(buf.size() == size_of(host));
  zl::copy_from_host(host.data(), buf.data(), DeviceKind::Cuda, size_of(host));
}

// Waits for the kernels on env's stream, then copies n floats back.
std::vector<float> download(const CudaEnv& env, const float* device, std::int64_t n) {
  env.sync();
  std::vector<float> host(static_cast<std::size_t>(n));
  zl::copy_to_host(device, DeviceKind::Cuda, host.data(), n);
  return host;
}

std::vector<float> download(const CudaEnv& env, const DeviceBuffer& buf) {
  return download(env, buf.data(), buf.size());
}

// Device int32 labels (DeviceBuffer holds floats only).
class DeviceLabels {
 public:
  explicit DeviceLabels(const std::vector<std::int32_t>& host) {
    const std::size_t bytes = host.size() * sizeof(std::int32_t);
    REQUIRE(cudaMalloc(&data_, bytes) == cudaSuccess);
    REQUIRE(cudaMemcpy(data_, host.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceLabels() { cudaFree(data_); }
  DeviceLabels(const DeviceLabels&) = delete;
  DeviceLabels& operator=(const DeviceLabels&) = delete;
  const std::int32_t* data() const { return data_; }

 private:
  std::int32_t* data_ = nullptr;
};

// GPU output vs the CPU kernel's output (the reference).
void check_vs_cpu(const std::vector<float>& gpu, const std::vector<float>& cpu, double atol,
                  double rtol, const std::string& what) {
  check_close(gpu, to_double(cpu), atol, rtol, what);
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const char* act_name(Activation act) {
  switch (act) {
    case Activation::Identity: return "identity";
    case Activation::Relu: return "relu";
    case Activation::Gelu: return "gelu";
    case Activation::Tanh: return "tanh";
  }
  return "?";
}

std::string acc_name(Accumulate acc) { return acc == Accumulate::Overwrite ? "=" : "+="; }

// Float column sums in another order than the CPU's: the error grows with the number of rows.
double column_sum_atol(std::int64_t rows) { return 1e-6 * static_cast<double>(rows) + 1e-6; }

}  // namespace

TEST_CASE("CUDA gemm matches the CPU gemm for every transpose combination", "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  const std::int64_t m = 37, n = 29, k = 53, pad = 3;
  const float alpha = 0.75f;
  std::mt19937 rng(42);
  for (const Transpose ta : {Transpose::No, Transpose::Yes}) {
    for (const Transpose tb : {Transpose::No, Transpose::Yes}) {
      for (const float beta : {0.0f, 0.5f}) {
        const std::string label = std::string("gemm A") + (ta == Transpose::Yes ? "^T" : "") +
                                  " B" + (tb == Transpose::Yes ? "^T" : "") +
                                  " beta=" + std::to_string(beta);
        // Stored shapes with padded row strides, so a mix-up of ld and width shows.
        const std::int64_t a_rows = ta == Transpose::No ? m : k;
        const std::int64_t lda = (ta == Transpose::No ? k : m) + pad;
        const std::int64_t b_rows = tb == Transpose::No ? k : n;
        const std::int64_t ldb = (tb == Transpose::No ? n : k) + pad;
        const std::int64_t ldc = n + pad;
        const std::vector<float> a = random_floats(a_rows * lda, rng);
        const std::vector<float> b = random_floats(b_rows * ldb, rng);
        std::vector<float> c = random_floats(m * ldc, rng);
        if (beta == 0.0f) {
          // beta == 0 must overwrite without reading C: NaN in the output region must vanish.
          for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t j = 0; j < n; ++j) {
              c[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
            }
          }
        }
        const DeviceBuffer da = upload(a), db = upload(b), dc = upload(c);
        zl::gemm(env.ctx(), ta, tb, m, n, k, alpha, da.data(), lda, db.data(), ldb, beta,
                 dc.data(), ldc);
        zl::gemm(cpu, ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
        // The whole C, padding included: the padding must come back untouched.
        check_vs_cpu(download(env, dc), c, 1e-5, 1e-4, label);
      }
    }
  }
  SECTION("k = 0 gives C = beta * C, and beta = 0 zeroes even NaN") {
    for (const float beta : {0.0f, 0.5f}) {
      std::vector<float> c = random_floats(m * n, rng);
      if (beta == 0.0f) c[5] = std::numeric_limits<float>::quiet_NaN();
      const DeviceBuffer dc = upload(c);
      zl::gemm(env.ctx(), Transpose::No, Transpose::No, m, n, 0, alpha, kNoFloats, 1, kNoFloats, 1,
               beta, dc.data(), n);
      zl::gemm(cpu, Transpose::No, Transpose::No, m, n, 0, alpha, kNoFloats, 1, kNoFloats, 1, beta,
               c.data(), n);
      check_vs_cpu(download(env, dc), c, 0.0, 0.0, "gemm k=0 beta=" + std::to_string(beta));
    }
  }
}

TEST_CASE("CUDA activations match the CPU", "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  const std::int64_t rows = 67, cols = 45, n = rows * cols;
  std::mt19937 rng(7);
  const std::vector<float> x = random_floats(n, rng, -3.0f, 3.0f);
  const std::vector<float> bias = random_floats(cols, rng);
  const std::vector<float> dy = random_floats(n, rng);
  // tanhf may differ by a few ulp between the CUDA and glibc math libraries; near |tanh| = 1
  // (1 + t, 1 - t*t) that is an absolute, not a relative, difference.
  const double atol = 5e-6, rtol = 1e-5;
  for (const Activation act :
       {Activation::Identity, Activation::Relu, Activation::Gelu, Activation::Tanh}) {
    for (const bool with_bias : {true, false}) {
      const std::string label = std::string(act_name(act)) + (with_bias ? " +bias" : "");
      std::vector<float> y(static_cast<std::size_t>(n));
      zl::bias_activation_forward(cpu, act, x.data(), with_bias ? bias.data() : nullptr, y.data(),
                                  rows, cols);
      const DeviceBuffer dx = upload(x), dbias = upload(bias);
      const DeviceBuffer dyv(DeviceKind::Cuda, n);
      zl::bias_activation_forward(env.ctx(), act, dx.data(), with_bias ? dbias.data() : nullptr,
                                  dyv.data(), rows, cols);
      check_vs_cpu(download(env, dyv), y, atol, rtol, label + " forward");
      // In place: y aliases x.
      zl::bias_activation_forward(env.ctx(), act, dx.data(), with_bias ? dbias.data() : nullptr,
                                  dx.data(), rows, cols);
      check_vs_cpu(download(env, dx), y, atol, rtol, label + " forward in place");
    }
    std::vector<float> dx_cpu(static_cast<std::size_t>(n));
    zl::activation_backward(cpu, act, x.data(), dy.data(), dx_cpu.data(), n);
    const DeviceBuffer dpre = upload(x), ddy = upload(dy);
    const DeviceBuffer ddx(DeviceKind::Cuda, n);
    zl::activation_backward(env.ctx(), act, dpre.data(), ddy.data(), ddx.data(), n);
    check_vs_cpu(download(env, ddx), dx_cpu, atol, rtol, std::string(act_name(act)) + " backward");
    // In place: dx aliases dy.
    zl::activation_backward(env.ctx(), act, dpre.data(), ddy.data(), ddy.data(), n);
    check_vs_cpu(download(env, ddy), dx_cpu, atol, rtol,
                 std::string(act_name(act)) + " backward in place");
  }
}

TEST_CASE("CUDA bias_backward matches the CPU, = and +=", "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  std::mt19937 rng(11);
  // 1500 rows take the multi-chunk path (partials in scratch, then a second kernel).
  for (const std::int64_t rows : {0, 1, 67, 1500}) {
    for (const std::int64_t cols : {1, 45, 300}) {
      for (const Accumulate acc : {Accumulate::Overwrite, Accumulate::Add}) {
        const std::string label = "bias_backward rows=" + std::to_string(rows) +
                                  " cols=" + std::to_string(cols) + " " + acc_name(acc);
        const std::vector<float> dy = random_floats(std::max<std::int64_t>(rows * cols, 1), rng);
        std::vector<float> dbias = random_floats(cols, rng);
        const DeviceBuffer ddy = upload(dy), ddbias = upload(dbias);
        zl::bias_backward(env.ctx(), ddy.data(), ddbias.data(), rows, cols, acc);
        zl::bias_backward(cpu, dy.data(), dbias.data(), rows, cols, acc);
        check_vs_cpu(download(env, ddbias), dbias, column_sum_atol(rows), 1e-5, label);
      }
    }
  }
}

TEST_CASE("CUDA add, accumulate and scale match the CPU exactly", "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  std::mt19937 rng(13);
  for (const std::int64_t n : {1, 1031, 300001}) {
    const std::string suffix = " n=" + std::to_string(n);
    const std::vector<float> a = random_floats(n, rng), b = random_floats(n, rng);
    // One float operation per element: no reassociation or contraction can change the result.
    std::vector<float> sum(static_cast<std::size_t>(n));
    zl::add(cpu, a.data(), b.data(), sum.data(), n);
    DeviceBuffer da = upload(a), db = upload(b);
    const DeviceBuffer dout(DeviceKind::Cuda, n);
    zl::add(env.ctx(), da.data(), db.data(), dout.data(), n);
    check_vs_cpu(download(env, dout), sum, 0.0, 0.0, "add" + suffix);
    zl::add(env.ctx(), da.data(), db.data(), da.data(), n);  // out aliases a
    check_vs_cpu(download(env, da), sum, 0.0, 0.0, "add in place" + suffix);

    std::vector<float> acc = b;
    zl::accumulate(cpu, a.data(), acc.data(), n, Accumulate::Add);
    upload_into(a, da);
    zl::accumulate(env.ctx(), da.data(), db.data(), n, Accumulate::Add);
    check_vs_cpu(download(env, db), acc, 0.0, 0.0, "accumulate +=" + suffix);
    zl::accumulate(env.ctx(), da.data(), db.data(), n, Accumulate::Overwrite);
    check_vs_cpu(download(env, db), a, 0.0, 0.0, "accumulate =" + suffix);

    std::vector<float> scaled = a;
    zl::scale(cpu, scaled.data(), n, -0.37f);
    zl::scale(env.ctx(), da.data(), n, -0.37f);
    check_vs_cpu(download(env, da), scaled, 0.0, 0.0, "scale" + suffix);
  }
}

TEST_CASE("CUDA layernorm forward and backward match the CPU", "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  const float eps = 1e-5f;
  std::mt19937 rng(17);
  // 1100 rows take the multi-chunk path of the dgamma/dbeta column sums.
  for (const std::int64_t rows : {1, 67, 1100}) {
    for (const std::int64_t cols : {1, 45, 300, 1031}) {
      const std::int64_t n = rows * cols;
      const std::string shape = " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols);
      const std::vector<float> x = random_floats(n, rng, -2.0f, 3.0f);
      const std::vector<float> gamma = random_floats(cols, rng, 0.5f, 1.5f);
      const std::vector<float> beta = random_floats(cols, rng);
      std::vector<float> y(static_cast<std::size_t>(n)), mean(static_cast<std::size_t>(rows)),
          rstd(static_cast<std::size_t>(rows));
      zl::layernorm_forward(cpu, x.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                            rstd.data(), rows, cols, eps);
      const DeviceBuffer dx = upload(x), dgamma = upload(gamma), dbeta = upload(beta);
      const DeviceBuffer dyv(DeviceKind::Cuda, n), dmean(DeviceKind::Cuda, rows),
          drstd(DeviceKind::Cuda, rows);
      zl::layernorm_forward(env.ctx(), dx.data(), dgamma.data(), dbeta.data(), dyv.data(),
                            dmean.data(), drstd.data(), rows, cols, eps);
      check_vs_cpu(download(env, dyv), y, 1e-5, 1e-5, "layernorm forward y" + shape);
      check_vs_cpu(download(env, dmean), mean, 1e-6, 1e-6, "layernorm forward mean" + shape);
      check_vs_cpu(download(env, drstd), rstd, 1e-6, 1e-5, "layernorm forward rstd" + shape);

      // The backward takes the CPU's saved statistics on both devices, so only it is compared.
      const std::vector<float> dy = random_floats(n, rng);
      const DeviceBuffer dsaved_mean = upload(mean), dsaved_rstd = upload(rstd);
      for (const Accumulate acc : {Accumulate::Overwrite, Accumulate::Add}) {
        for (const bool in_place : {false, true}) {
          const std::string label = "layernorm backward" + shape + " " + acc_name(acc) +
                                    (in_place ? " dx aliases dy" : "");
          std::vector<float> dx_cpu(static_cast<std::size_t>(n));
          std::vector<float> dgamma_cpu = random_floats(cols, rng);
          std::vector<float> dbeta_cpu = random_floats(cols, rng);
          const DeviceBuffer ddy = upload(dy), ddgamma = upload(dgamma_cpu),
                             ddbeta = upload(dbeta_cpu);
          const DeviceBuffer ddx_separate(DeviceKind::Cuda, in_place ? 0 : n);
          float* ddx = in_place ? ddy.data() : ddx_separate.data();
          zl::layernorm_backward(env.ctx(), dx.data(), dgamma.data(), dsaved_mean.data(),
                                 dsaved_rstd.data(), ddy.data(), ddx, ddgamma.data(),
                                 ddbeta.data(), rows, cols, acc);
          zl::layernorm_backward(cpu, x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(),
                                 dx_cpu.data(), dgamma_cpu.data(), dbeta_cpu.data(), rows, cols,
                                 acc);
          check_vs_cpu(download(env, ddx, n), dx_cpu, 1e-5, 1e-4, label + " dx");
          check_vs_cpu(download(env, ddgamma), dgamma_cpu, column_sum_atol(rows), 1e-5,
                       label + " dgamma");
          check_vs_cpu(download(env, ddbeta), dbeta_cpu, column_sum_atol(rows), 1e-5,
                       label + " dbeta");
        }
      }
    }
  }
}

TEST_CASE("CUDA softmax_cross_entropy matches the CPU", "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  std::mt19937 rng(19);
  for (const std::int64_t rows : {1, 67, 300}) {
    for (const std::int64_t cols : {1, 10, 45, 100}) {
      const std::int64_t n = rows * cols;
      const std::vector<float> logits = random_floats(n, rng, -5.0f, 5.0f);
      std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
      std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(cols - 1));
      for (std::int32_t& l : labels) l = pick(rng);
      const DeviceLabels dlabels(labels);
      const float grad_scale = 1.0f / static_cast<float>(rows);
      for (const int variant : {0, 1, 2}) {  // no dlogits, separate dlogits, dlogits = logits
        const std::string label = "softmax_cross_entropy rows=" + std::to_string(rows) +
                                  " cols=" + std::to_string(cols) +
                                  (variant == 0 ? " loss only" : variant == 1 ? "" : " in place");
        std::vector<float> dlogits_cpu(static_cast<std::size_t>(n));
        std::int64_t correct_cpu = -1;
        const double loss_cpu = zl::softmax_cross_entropy(
            cpu, logits.data(), labels.data(), rows, cols,
            variant == 0 ? nullptr : dlogits_cpu.data(), grad_scale, &correct_cpu);
        const DeviceBuffer dlogits = upload(logits);
        const DeviceBuffer dgrad(DeviceKind::Cuda, variant == 1 ? n : 0);
        float* grad = variant == 0 ? nullptr : variant == 1 ? dgrad.data() : dlogits.data();
        std::int64_t correct_gpu = -1;
        const double loss_gpu = zl::softmax_cross_entropy(
            env.ctx(), dlogits.data(), dlabels.data(), rows, cols, grad, grad_scale, &correct_gpu);
        INFO(label);
        CHECK(loss_gpu == Approx(loss_cpu).epsilon(1e-6).margin(1e-5));
        CHECK(correct_gpu == correct_cpu);  // exact float comparisons on the same logits
        if (variant != 0) check_vs_cpu(download(env, grad, n), dlogits_cpu, 1e-6, 1e-5, label);
      }
    }
  }
  SECTION("a label outside [0, cols) is a UserError, as on the CPU") {
    const std::int64_t rows = 8, cols = 10;
    const DeviceBuffer dlogits = upload(random_floats(rows * cols, rng));
    for (const std::int32_t bad : {-1, 10}) {
      std::vector<std::int32_t> labels(rows, 3);
      labels[5] = bad;
      const DeviceLabels dlabels(labels);
      std::int64_t correct = 0;
      REQUIRE_THROWS_AS(zl::softmax_cross_entropy(env.ctx(), dlogits.data(), dlabels.data(), rows,
                                                  cols, nullptr, 1.0f, &correct),
                        zl::UserError);
    }
  }
}

TEST_CASE("CUDA squared_error and sum_of_squares match the CPU", "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  std::mt19937 rng(23);
  // 2^20 + 5 elements fill the 1024 first-pass blocks and loop over the grid.
  for (const std::int64_t n : {1, 1000, 100003, (1 << 20) + 5}) {
    const std::string suffix = " n=" + std::to_string(n);
    const std::vector<float> pred = random_floats(n, rng), target = random_floats(n, rng);
    const double ss_cpu = zl::sum_of_squares(cpu, pred.data(), n);
    const DeviceBuffer dpred = upload(pred), dtarget = upload(target);
    // Both sum the same double terms, in different orders: agreement to ~1e-15 per term.
    CHECK(zl::sum_of_squares(env.ctx(), dpred.data(), n) == Approx(ss_cpu).epsilon(1e-10));
    for (const int variant : {0, 1, 2}) {  // no dpred, separate dpred, dpred = pred
      const char* kind = variant == 0 ? " loss only" : variant == 2 ? " in place" : "";
      const std::string label = "squared_error" + suffix + kind;
      std::vector<float> grad_cpu(static_cast<std::size_t>(n));
      const double se_cpu = zl::squared_error(cpu, pred.data(), target.data(), n,
                                              variant == 0 ? nullptr : grad_cpu.data(), 0.25f);
      const DeviceBuffer dp = upload(pred);
      const DeviceBuffer dgrad(DeviceKind::Cuda, variant == 1 ? n : 0);
      float* grad = variant == 0 ? nullptr : variant == 1 ? dgrad.data() : dp.data();
      const double se_gpu =
          zl::squared_error(env.ctx(), dp.data(), dtarget.data(), n, grad, 0.25f);
      INFO(label);
      CHECK(se_gpu == Approx(se_cpu).epsilon(1e-10));
      if (variant != 0) check_vs_cpu(download(env, grad, n), grad_cpu, 0.0, 1e-6, label);
    }
  }
  CHECK(zl::sum_of_squares(env.ctx(), kNoFloats, 0) == 0.0);
  CHECK(zl::squared_error(env.ctx(), kNoFloats, nullptr, 0, nullptr, 1.0f) == 0.0);
}

TEST_CASE("CUDA accumulating losses and total_sum_of_squares match the CPU; one read-back",
          "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  const zl::ExecContext cpu{};
  std::mt19937 rng(29);
  const std::int64_t rows = 300, cols = 10, n = rows * cols;
  const std::vector<float> logits = random_floats(n, rng), target = random_floats(n, rng);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % cols);
  }
  double cpu_sums[zl::kLossSumCount] = {};
  std::vector<float> dlogits_cpu(static_cast<std::size_t>(n));
  std::vector<float> dpred_cpu(static_cast<std::size_t>(n));
  for (int call = 0; call < 2; ++call) {
    zl::softmax_cross_entropy_accumulate(cpu, logits.data(), labels.data(), rows, cols,
                                         dlogits_cpu.data(), 0.5f, cpu_sums);
    zl::squared_error_accumulate(cpu, logits.data(), target.data(), n, dpred_cpu.data(), 0.25f,
                                 static_cast<double>(n), cpu_sums);
  }
  const DeviceBuffer dlogits = upload(logits), dtarget = upload(target);
  DeviceBuffer dlabels(DeviceKind::Cuda, rows);
  zl::copy_from_host(reinterpret_cast<const float*>(labels.data()), dlabels.data(),
                     DeviceKind::Cuda, rows);
  const DeviceBuffer dgrad(DeviceKind::Cuda, n), dpred(DeviceKind::Cuda, n);
  DeviceBuffer sums(DeviceKind::Cuda, 2 * zl::kLossSumCount);
  auto* dsums = reinterpret_cast<double*>(sums.data());
  const auto* dl = reinterpret_cast<const std::int32_t*>(dlabels.data());
  for (int call = 0; call < 2; ++call) {
    zl::softmax_cross_entropy_accumulate(env.ctx(), dlogits.data(), dl, rows, cols, dgrad.data(),
                                         0.5f, dsums);
    zl::squared_error_accumulate(env.ctx(), dlogits.data(), dtarget.data(), n, dpred.data(),
                                 0.25f, static_cast<double>(n), dsums);
  }
  double got[zl::kLossSumCount] = {};
  zl::take_device_sums(env.ctx(), dsums, got, zl::kLossSumCount);
  CHECK(got[0] == Approx(cpu_sums[0]).epsilon(1e-6).margin(1e-5));  // expf vs std::exp
  CHECK(got[1] == cpu_sums[1]);
  CHECK(got[2] == 0.0);
  check_vs_cpu(download(env, dgrad.data(), n), dlogits_cpu, 1e-6, 1e-5, "accumulate dlogits");
  check_vs_cpu(download(env, dpred.data(), n), dpred_cpu, 0.0, 1e-6, "accumulate dpred");
  zl::take_device_sums(env.ctx(), dsums, got, zl::kLossSumCount);  // the take zeroed them
  CHECK((got[0] == 0.0 && got[1] == 0.0 && got[2] == 0.0));

  // A bad label is counted, not thrown: the caller reports it when it reads the sums.
  labels[7] = static_cast<std::int32_t>(cols);
  zl::copy_from_host(reinterpret_cast<const float*>(labels.data()), dlabels.data(),
                     DeviceKind::Cuda, rows);
  zl::softmax_cross_entropy_accumulate(env.ctx(), dlogits.data(), dl, rows, cols, dgrad.data(),
                                       0.5f, dsums);
  zl::take_device_sums(env.ctx(), dsums, got, zl::kLossSumCount);
  CHECK(got[2] == 1.0);

  // Spans: bitwise the in-order host sum of each span's sum_of_squares (the same kernels).
  const std::vector<zl::FloatSpan> spans = {
      {dlogits.data(), n}, {nullptr, 0}, {dtarget.data() + 5, 1000}};
  const double expected = (0.0 + zl::sum_of_squares(env.ctx(), dlogits.data(), n)) + 0.0 +
                          zl::sum_of_squares(env.ctx(), dtarget.data() + 5, 1000);
  CHECK(zl::total_sum_of_squares(env.ctx(), spans.data(), 3) == expected);
  CHECK(zl::total_sum_of_squares(env.ctx(), spans.data(), 0) == 0.0);
}

TEST_CASE("CUDA reductions are bitwise reproducible", "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  std::mt19937 rng(29);
  const std::int64_t big = (1 << 20) + 5;
  const DeviceBuffer dbig = upload(random_floats(big, rng));
  const double ss1 = zl::sum_of_squares(env.ctx(), dbig.data(), big);
  const double ss2 = zl::sum_of_squares(env.ctx(), dbig.data(), big);
  CHECK(std::memcmp(&ss1, &ss2, sizeof(double)) == 0);

  const std::int64_t rows = 1500, cols = 300, n = rows * cols;
  const DeviceBuffer dx = upload(random_floats(n, rng)), ddy = upload(random_floats(n, rng));
  const DeviceBuffer dgamma = upload(random_floats(cols, rng, 0.5f, 1.5f));
  const DeviceBuffer dbeta = upload(random_floats(cols, rng));
  const DeviceBuffer dmean(DeviceKind::Cuda, rows), drstd(DeviceKind::Cuda, rows),
      dy(DeviceKind::Cuda, n);
  zl::layernorm_forward(env.ctx(), dx.data(), dgamma.data(), dbeta.data(), dy.data(),
                        dmean.data(), drstd.data(), rows, cols, 1e-5f);
  std::vector<float> first[4];
  for (int run = 0; run < 2; ++run) {
    const DeviceBuffer ddx(DeviceKind::Cuda, n), ddgamma(DeviceKind::Cuda, cols),
        ddbeta(DeviceKind::Cuda, cols), ddbias(DeviceKind::Cuda, cols);
    zl::layernorm_backward(env.ctx(), dx.data(), dgamma.data(), dmean.data(), drstd.data(),
                           ddy.data(), ddx.data(), ddgamma.data(), ddbeta.data(), rows, cols,
                           Accumulate::Overwrite);
    zl::bias_backward(env.ctx(), ddy.data(), ddbias.data(), rows, cols, Accumulate::Overwrite);
    const std::vector<float> now[4] = {download(env, ddx), download(env, ddgamma),
                                       download(env, ddbeta), download(env, ddbias)};
    for (int i = 0; i < 4; ++i) {
      if (run == 0) {
        first[i] = now[i];
      } else {
        INFO("output " << i << " (dx, dgamma, dbeta, dbias)");
        CHECK(bitwise_equal(first[i], now[i]));
      }
    }
  }

  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) labels[i] = static_cast<std::int32_t>(i % cols);
  const DeviceLabels dlabels(labels);
  std::int64_t c1 = 0, c2 = 0;
  const double l1 = zl::softmax_cross_entropy(env.ctx(), dx.data(), dlabels.data(), rows, cols,
                                              nullptr, 1.0f, &c1);
  const double l2 = zl::softmax_cross_entropy(env.ctx(), dx.data(), dlabels.data(), rows, cols,
                                              nullptr, 1.0f, &c2);
  CHECK(std::memcmp(&l1, &l2, sizeof(double)) == 0);
  CHECK(c1 == c2);
}

TEST_CASE("CUDA adam and sgd steps match the CPU for 10 steps, aligned and unaligned",
          "[cuda][kernels][optimizer]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  const double atol = 1e-6, rtol = 1e-5;
  // offset 0: a 256-byte aligned slice (the float4 path plus a scalar tail, n being odd);
  // offset 1: a slice starting 4 bytes in (the scalar fallback). The buffers are longer than the
  // slice and compared whole, so a write outside [offset, offset + n) fails too.
  for (const std::int64_t n : {7, 1031, 100001}) {
    for (const std::int64_t offset : {0, 1}) {
      const std::int64_t total = n + 8;
      const std::string where = " n=" + std::to_string(n) + " offset=" + std::to_string(offset);

      struct AdamCase {
        const char* name;
        zl::AdamHyper h;
        float grad_scale;
      };
      zl::AdamHyper adam_l2;
      adam_l2.lr = 1e-2f;
      adam_l2.weight_decay = 0.05f;
      zl::AdamHyper adamw = adam_l2;
      adamw.decoupled_weight_decay = true;
      adamw.weight_decay = 0.1f;
      zl::AdamHyper low_betas;
      low_betas.lr = 3e-2f;
      low_betas.beta1 = 0.5f;
      low_betas.beta2 = 0.9f;
      low_betas.eps = 1e-6f;
      for (const AdamCase& c : {AdamCase{"adam+l2", adam_l2, 1.0f},
                                AdamCase{"adamw", adamw, 0.5f},
                                AdamCase{"adam betas (0.5, 0.9)", low_betas, 0.25f}}) {
        std::mt19937 rng(static_cast<unsigned>(n * 31 + offset));
        std::vector<float> p = random_floats(total, rng);
        std::vector<float> m(static_cast<std::size_t>(total), 0.0f), v = m;
        DeviceBuffer dp = upload(p), dm = upload(m), dv = upload(v);
        DeviceBuffer dg(DeviceKind::Cuda, total);
        if (offset == 0) REQUIRE(reinterpret_cast<std::uintptr_t>(dp.data()) % 16 == 0);
        for (std::int64_t t = 1; t <= 10; ++t) {
          const std::vector<float> g = random_floats(total, rng, -2.0f, 2.0f);
          upload_into(g, dg);
          const float lr = c.h.lr * (1.0f - 0.05f * static_cast<float>(t));
          const zl::AdamStep s = zl::make_adam_step(c.h, lr, t, c.grad_scale);
          zl::adam_step(env.ctx(), dp.data() + offset, dg.data() + offset, dm.data() + offset,
                        dv.data() + offset, n, s);
          zl::adam_step_cpu(p.data() + offset, g.data() + offset, m.data() + offset,
                            v.data() + offset, n, s);
        }
        const std::string label = std::string(c.name) + where;
        check_vs_cpu(download(env, dp), p, atol, rtol, label + " p");
        check_vs_cpu(download(env, dm), m, atol, rtol, label + " exp_avg");
        check_vs_cpu(download(env, dv), v, atol, rtol, label + " exp_avg_sq");
      }

      struct SgdCase {
        const char* name;
        zl::SgdHyper h;
        float grad_scale;
      };
      zl::SgdHyper plain;
      plain.lr = 0.1f;
      plain.weight_decay = 0.01f;
      zl::SgdHyper momentum = plain;
      momentum.momentum = 0.9f;
      momentum.dampening = 0.3f;
      zl::SgdHyper nesterov = plain;
      nesterov.momentum = 0.9f;
      nesterov.nesterov = true;
      for (const SgdCase& c : {SgdCase{"sgd (no buffer)", plain, 1.0f},
                               SgdCase{"sgd momentum+dampening", momentum, 0.5f},
                               SgdCase{"sgd nesterov", nesterov, 1.0f}}) {
        std::mt19937 rng(static_cast<unsigned>(n * 37 + offset));
        std::vector<float> p = random_floats(total, rng);
        std::vector<float> buf(static_cast<std::size_t>(total), 0.0f);
        DeviceBuffer dp = upload(p), dbuf = upload(buf);
        DeviceBuffer dg(DeviceKind::Cuda, total);
        const bool has_buf = c.h.momentum != 0.0f;
        for (std::int64_t t = 1; t <= 10; ++t) {
          const std::vector<float> g = random_floats(total, rng, -2.0f, 2.0f);
          upload_into(g, dg);
          const float lr = c.h.lr * (1.0f - 0.05f * static_cast<float>(t));
          const zl::SgdStep s = zl::make_sgd_step(c.h, lr, t, c.grad_scale);
          zl::sgd_step(env.ctx(), dp.data() + offset, dg.data() + offset,
                       has_buf ? dbuf.data() + offset : nullptr, n, s);
          zl::sgd_step_cpu(p.data() + offset, g.data() + offset,
                           has_buf ? buf.data() + offset : nullptr, n, s);
        }
        const std::string label = std::string(c.name) + where;
        check_vs_cpu(download(env, dp), p, atol, rtol, label + " p");
        check_vs_cpu(download(env, dbuf), buf, atol, rtol, label + " momentum_buffer");
      }
    }
  }
  SECTION("an empty slice is a no-op") {
    const zl::AdamStep s = zl::make_adam_step(zl::AdamHyper{}, 1e-3f, 1, 1.0f);
    zl::adam_step(env.ctx(), nullptr, nullptr, nullptr, nullptr, 0, s);
    zl::sgd_step(env.ctx(), nullptr, nullptr, nullptr, 0,
                 zl::make_sgd_step(zl::SgdHyper{}, 1e-2f, 1, 1.0f));
    env.sync();
  }
}

TEST_CASE("CUDA DeviceBuffer: zero-filled, round trip, empty", "[cuda][kernels][device_buffer]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  std::mt19937 rng(31);
  for (const std::int64_t n : {1, 3, 1031}) {
    DeviceBuffer buf(DeviceKind::Cuda, n);
    REQUIRE(buf.data() != nullptr);
    CHECK(buf.device() == DeviceKind::Cuda);
    CHECK(reinterpret_cast<std::uintptr_t>(buf.data()) % 64 == 0);
    CHECK(download(env, buf) == std::vector<float>(static_cast<std::size_t>(n), 0.0f));
    const std::vector<float> host = random_floats(n, rng);
    upload_into(host, buf);
    CHECK(bitwise_equal(download(env, buf), host));
  }
  DeviceBuffer empty(DeviceKind::Cuda, 0);
  CHECK(empty.data() == nullptr);
}

TEST_CASE("CUDA reductions read back with a limit return what they return without one",
          "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  std::mt19937 rng(41);
  constexpr std::int64_t rows = 37, cols = 11, n = rows * cols;
  DeviceBuffer logits(DeviceKind::Cuda, n), target(DeviceKind::Cuda, n);
  upload_into(random_floats(n, rng), logits);
  upload_into(random_floats(n, rng), target);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) labels[i] = static_cast<std::int32_t>((i * 7) % cols);
  const DeviceLabels dlabels(labels);
  zl::ExecContext limited = env.ctx();
  limited.host_wait_timeout_s = 30.0;  // the polled-event path (Note [Host read-backs])
  std::int64_t c_plain = 0, c_limited = 0;
  CHECK(zl::softmax_cross_entropy(env.ctx(), logits.data(), dlabels.data(), rows, cols, nullptr,
                                  1.0f, &c_plain) ==
        zl::softmax_cross_entropy(limited, logits.data(), dlabels.data(), rows, cols, nullptr,
                                  1.0f, &c_limited));
  CHECK(c_plain == c_limited);
  CHECK(zl::squared_error(env.ctx(), logits.data(), target.data(), n, nullptr, 1.0f) ==
        zl::squared_error(limited, logits.data(), target.data(), n, nullptr, 1.0f));
  CHECK(zl::sum_of_squares(env.ctx(), logits.data(), n) ==
        zl::sum_of_squares(limited, logits.data(), n));
}

TEST_CASE("CUDA reductions read back with a limit: a stuck stream times out instead of hanging",
          "[cuda][kernels]") {
  if (!cuda_device_visible()) return;
  CudaEnv env;
  const auto stream = static_cast<cudaStream_t>(env.ctx().stream);
  DeviceBuffer ones(DeviceKind::Cuda, 1024);
  upload_into(std::vector<float>(1024, 1.0f), ones);
  zl::ExecContext limited = env.ctx();
  limited.host_wait_timeout_s = 0.2;
  CHECK(zl::sum_of_squares(limited, ones.data(), 1024) == 1024.0);  // unblocked, and warm

  // Stand-in for a collective a dead peer never joins: env's stream waits for an event behind a
  // host function, on another stream, that blocks until released. The guard releases it and
  // drains both streams on every exit, so a failed check cannot leave the device stuck.
  struct Blocker {
    cudaStream_t stream = nullptr;
    cudaEvent_t released = nullptr;
    std::atomic<bool> release{false};
    cudaStream_t waiting = nullptr;
    ~Blocker() {
      release = true;
      if (stream != nullptr) cudaStreamSynchronize(stream);
      if (waiting != nullptr) cudaStreamSynchronize(waiting);
      if (released != nullptr) cudaEventDestroy(released);
      if (stream != nullptr) cudaStreamDestroy(stream);
    }
  } blocker;
  blocker.waiting = stream;
  REQUIRE(cudaStreamCreateWithFlags(&blocker.stream, cudaStreamNonBlocking) == cudaSuccess);
  const cudaHostFn_t block_until_released = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  REQUIRE(cudaLaunchHostFunc(blocker.stream, block_until_released, &blocker.release) ==
          cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&blocker.released, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventRecord(blocker.released, blocker.stream) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(stream, blocker.released, 0) == cudaSuccess);

  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(zl::sum_of_squares(limited, ones.data(), 1024),
                    Catch::Contains("sum_of_squares") &&
                        Catch::Contains("did not finish within runtime.timeout_s = 0.2 s"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));

  blocker.release = true;  // the stream drains; a new read-back (another value) now completes
  env.sync();
  CHECK(zl::sum_of_squares(limited, ones.data(), 512) == 512.0);
}

#else

// A CPU-only build (ZEROLAP_CUDA=OFF, or no nvcc) has no CUDA code to test: say so rather than
// report an empty, silently passing file.
TEST_CASE("CUDA kernel tests are not built", "[cuda]") {
  WARN("built without CUDA (ZEROLAP_CUDA=OFF or nvcc not found): CUDA tests skipped");
}

#endif  // ZEROLAP_WITH_CUDA
