// The element-wise and row-wise CPU kernels against naive double-precision references on small
// random shapes: activations (forward, and backward also against finite differences), bias and
// residual gradients in both Accumulate modes, LayerNorm, softmax cross-entropy, MSE, norms.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/elementwise.h"
#include "base/errors.h"
#include "base/exec_context.h"
#include "kernel_test_util.h"

namespace {

using zl::test::check_close;
using zl::test::random_floats;
using zl::test::to_double;

constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-5;
const zl::ExecContext kCpu{};

// (rows, cols) pairs: single element, odd widths for vector tails, one wider than a vector block.
const std::vector<std::pair<std::int64_t, std::int64_t>> kShapes = {
    {1, 1}, {3, 7}, {5, 33}, {17, 130}};

const char* act_name(zl::Activation a) {
  switch (a) {
    case zl::Activation::Identity: return "identity";
    case zl::Activation::Relu: return "relu";
    case zl::Activation::Gelu: return "gelu";
    case zl::Activation::Tanh: return "tanh";
  }
  return "?";
}

constexpr zl::Activation kActivations[] = {zl::Activation::Identity, zl::Activation::Relu,
                                           zl::Activation::Gelu, zl::Activation::Tanh};

double act_ref(zl::Activation a, double x) {
  switch (a) {
    case zl::Activation::Identity: return x;
    case zl::Activation::Relu: return x > 0.0 ? x : 0.0;
    case zl::Activation::Gelu: {
      // torch.nn.functional.gelu(x, approximate='tanh')
      const double pi = 3.14159265358979323846;
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
    }
    case zl::Activation::Tanh: return std::tanh(x);
  }
  return 0.0;
}

// The derivative by central differences of the double reference: independent of any closed form.
double act_grad_ref(zl::Activation a, double x) {
  if (a == zl::Activation::Relu) return x > 0.0 ? 1.0 : 0.0;  // kink at 0: PyTorch uses 0
  const double h = 1e-5;
  return (act_ref(a, x + h) - act_ref(a, x - h)) / (2.0 * h);
}

}  // namespace

TEST_CASE("bias_activation_forward matches the reference", "[kernels][elementwise]") {
  for (const zl::Activation act : kActivations) {
    for (const auto& [rows, cols] : kShapes) {
      std::mt19937 rng(static_cast<unsigned>(rows * 131 + cols));
      const std::vector<float> x = random_floats(rows * cols, rng, -4.0f, 4.0f);
      const std::vector<float> bias = random_floats(cols, rng);
      for (const bool with_bias : {true, false}) {
        std::vector<double> ref(x.size());
        for (std::int64_t i = 0; i < rows; ++i) {
          for (std::int64_t j = 0; j < cols; ++j) {
            const double pre = static_cast<double>(x[i * cols + j]) + (with_bias ? bias[j] : 0.0f);
            ref[i * cols + j] = act_ref(act, pre);
          }
        }
        const std::string label = std::string(act_name(act)) + " " + std::to_string(rows) + "x" +
                                  std::to_string(cols) + (with_bias ? " bias" : " no bias");
        std::vector<float> y(x.size(), std::numeric_limits<float>::quiet_NaN());
        zl::bias_activation_forward(kCpu, act, x.data(), with_bias ? bias.data() : nullptr,
                                    y.data(), rows, cols);
        check_close(y, ref, kAtol, kRtol, label);
        // In place (x and y alias), as the layers use it.
        std::vector<float> xy = x;
        zl::bias_activation_forward(kCpu, act, xy.data(), with_bias ? bias.data() : nullptr,
                                    xy.data(), rows, cols);
        check_close(xy, ref, kAtol, kRtol, label + " in place");
      }
    }
  }
}

TEST_CASE("activation_backward matches finite differences", "[kernels][elementwise]") {
  for (const zl::Activation act : kActivations) {
    for (const std::int64_t n : {1, 7, 1031}) {
      std::mt19937 rng(static_cast<unsigned>(n) + 99u);
      std::vector<float> pre = random_floats(n, rng, -4.0f, 4.0f);
      pre[0] = 0.0f;  // ReLU's kink: derivative 0, as PyTorch
      const std::vector<float> dy = random_floats(n, rng);
      std::vector<double> ref(pre.size());
      for (std::size_t i = 0; i < pre.size(); ++i) ref[i] = dy[i] * act_grad_ref(act, pre[i]);
      const std::string label = std::string(act_name(act)) + " n=" + std::to_string(n);
      std::vector<float> dx(pre.size(), std::numeric_limits<float>::quiet_NaN());
      zl::activation_backward(kCpu, act, pre.data(), dy.data(), dx.data(), n);
      check_close(dx, ref, kAtol, kRtol, label);
      std::vector<float> in_place = dy;
      zl::activation_backward(kCpu, act, pre.data(), in_place.data(), in_place.data(), n);
      check_close(in_place, ref, kAtol, kRtol, label + " in place");
    }
  }
}

TEST_CASE("bias_backward sums columns, = or +=", "[kernels][elementwise]") {
  for (const auto& [rows, cols] : kShapes) {
    std::mt19937 rng(static_cast<unsigned>(rows * 7 + cols));
    const std::vector<float> dy = random_floats(rows * cols, rng);
    const std::vector<float> init = random_floats(cols, rng);
    std::vector<double> sums(static_cast<std::size_t>(cols), 0.0);
    for (std::int64_t i = 0; i < rows; ++i) {
      for (std::int64_t j = 0; j < cols; ++j) sums[j] += dy[i * cols + j];
    }
    const std::string label = std::to_string(rows) + "x" + std::to_string(cols);

    std::vector<float> db(static_cast<std::size_t>(cols), std::numeric_limits<float>::quiet_NaN());
    zl::bias_backward(kCpu, dy.data(), db.data(), rows, cols, zl::Accumulate::Overwrite);
    check_close(db, sums, kAtol, kRtol, label + " overwrite (over NaN)");

    std::vector<float> acc = init;
    std::vector<double> ref_acc(sums.size());
    for (std::size_t j = 0; j < sums.size(); ++j) ref_acc[j] = init[j] + sums[j];
    zl::bias_backward(kCpu, dy.data(), acc.data(), rows, cols, zl::Accumulate::Add);
    check_close(acc, ref_acc, kAtol, kRtol, label + " accumulate");
  }
}

TEST_CASE("add and accumulate", "[kernels][elementwise]") {
  for (const std::int64_t n : {0, 1, 7, 1031}) {
    std::mt19937 rng(static_cast<unsigned>(n) + 5u);
    const std::vector<float> a = random_floats(n, rng);
    const std::vector<float> b = random_floats(n, rng);
    std::vector<double> sum(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) sum[i] = static_cast<double>(a[i]) + b[i];
    const std::string label = "n=" + std::to_string(n);

    std::vector<float> out(a.size(), std::numeric_limits<float>::quiet_NaN());
    zl::add(kCpu, a.data(), b.data(), out.data(), n);
    check_close(out, sum, kAtol, kRtol, "add " + label);
    std::vector<float> aliased = a;
    zl::add(kCpu, aliased.data(), b.data(), aliased.data(), n);
    check_close(aliased, sum, kAtol, kRtol, "add in place " + label);

    std::vector<float> dst(a.size(), std::numeric_limits<float>::quiet_NaN());
    zl::accumulate(kCpu, a.data(), dst.data(), n, zl::Accumulate::Overwrite);
    check_close(dst, to_double(a), 0.0, 0.0, "accumulate overwrite " + label);
    dst = b;
    zl::accumulate(kCpu, a.data(), dst.data(), n, zl::Accumulate::Add);
    check_close(dst, sum, kAtol, kRtol, "accumulate add " + label);
  }
}

namespace {

// LayerNorm of one row in double: biased variance, as torch.nn.LayerNorm.
void layernorm_row_ref(const double* x, const double* gamma, const double* beta, double* y,
                       std::int64_t cols, double eps, double* mean_out, double* rstd_out) {
  double mean = 0.0;
  for (std::int64_t j = 0; j < cols; ++j) mean += x[j];
  mean /= static_cast<double>(cols);
  double var = 0.0;
  for (std::int64_t j = 0; j < cols; ++j) var += (x[j] - mean) * (x[j] - mean);
  var /= static_cast<double>(cols);
  const double rstd = 1.0 / std::sqrt(var + eps);
  for (std::int64_t j = 0; j < cols; ++j) y[j] = (x[j] - mean) * rstd * gamma[j] + beta[j];
  if (mean_out != nullptr) *mean_out = mean;
  if (rstd_out != nullptr) *rstd_out = rstd;
}

}  // namespace

TEST_CASE("layernorm forward and backward", "[kernels][elementwise]") {
  const float eps = 1e-5f;
  for (const auto& shape : {std::pair<std::int64_t, std::int64_t>{1, 2}, {3, 7}, {4, 33},
                            {2, 130}}) {
    // Plain variables, not a structured binding: the lambdas below capture them (clang < 16, used
    // by the sanitizer build, cannot capture structured bindings).
    const std::int64_t rows = shape.first, cols = shape.second;
    std::mt19937 rng(static_cast<unsigned>(rows * 1000 + cols));
    // An offset mean and a spread of scales, so mean subtraction and rstd both matter.
    std::vector<float> x = random_floats(rows * cols, rng, -3.0f, 5.0f);
    const std::vector<float> gamma = random_floats(cols, rng, 0.5f, 1.5f);
    const std::vector<float> beta = random_floats(cols, rng);
    const std::vector<float> dy = random_floats(rows * cols, rng);
    const std::vector<double> xd = to_double(x), gd = to_double(gamma), bd = to_double(beta);
    const std::string label = std::to_string(rows) + "x" + std::to_string(cols);

    // Forward.
    std::vector<double> y_ref(x.size()), mean_ref(rows), rstd_ref(rows);
    for (std::int64_t i = 0; i < rows; ++i) {
      layernorm_row_ref(&xd[i * cols], gd.data(), bd.data(), &y_ref[i * cols], cols, eps,
                        &mean_ref[i], &rstd_ref[i]);
    }
    std::vector<float> y(x.size()), mean(rows), rstd(rows);
    zl::layernorm_forward(kCpu, x.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                          rstd.data(), rows, cols, eps);
    check_close(y, y_ref, 1e-5, kRtol, "layernorm y " + label);
    check_close(mean, mean_ref, kAtol, kRtol, "layernorm mean " + label);
    check_close(rstd, rstd_ref, kAtol, kRtol, "layernorm rstd " + label);

    // Backward against central differences of L = sum(dy * y) in double. The float kernel's
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) cancels terms of size ~1, so allow 10x
    // the default tolerance (a wrong term is off by O(1), far outside it).
    constexpr double kLnAtol = 1e-5, kLnRtol = 1e-4;
    const double h = 1e-6;
    std::vector<double> dx_ref(x.size()), dgamma_ref(cols, 0.0), dbeta_ref(cols, 0.0);
    std::vector<double> row_y(cols);
    auto row_loss = [&](const double* xr, const double* g, const double* b, std::int64_t i) {
      layernorm_row_ref(xr, g, b, row_y.data(), cols, eps, nullptr, nullptr);
      double l = 0.0;
      for (std::int64_t j = 0; j < cols; ++j) l += dy[i * cols + j] * row_y[j];
      return l;
    };
    for (std::int64_t i = 0; i < rows; ++i) {
      std::vector<double> xr(&xd[i * cols], &xd[i * cols] + cols);
      std::vector<double> g = gd, b = bd;
      for (std::int64_t j = 0; j < cols; ++j) {
        const double keep_x = xr[j], keep_g = g[j], keep_b = b[j];
        xr[j] = keep_x + h;
        const double lx_plus = row_loss(xr.data(), g.data(), b.data(), i);
        xr[j] = keep_x - h;
        const double lx_minus = row_loss(xr.data(), g.data(), b.data(), i);
        xr[j] = keep_x;
        dx_ref[i * cols + j] = (lx_plus - lx_minus) / (2 * h);
        g[j] = keep_g + h;
        const double lg_plus = row_loss(xr.data(), g.data(), b.data(), i);
        g[j] = keep_g - h;
        const double lg_minus = row_loss(xr.data(), g.data(), b.data(), i);
        g[j] = keep_g;
        dgamma_ref[j] += (lg_plus - lg_minus) / (2 * h);
        b[j] = keep_b + h;
        const double lb_plus = row_loss(xr.data(), g.data(), b.data(), i);
        b[j] = keep_b - h;
        const double lb_minus = row_loss(xr.data(), g.data(), b.data(), i);
        b[j] = keep_b;
        dbeta_ref[j] += (lb_plus - lb_minus) / (2 * h);
      }
    }
    std::vector<float> dx(x.size(), std::numeric_limits<float>::quiet_NaN());
    std::vector<float> dgamma(cols, std::numeric_limits<float>::quiet_NaN());
    std::vector<float> dbeta(cols, std::numeric_limits<float>::quiet_NaN());
    zl::layernorm_backward(kCpu, x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(),
                           dx.data(), dgamma.data(), dbeta.data(), rows, cols,
                           zl::Accumulate::Overwrite);
    check_close(dx, dx_ref, kLnAtol, kLnRtol, "layernorm dx " + label);
    check_close(dgamma, dgamma_ref, kLnAtol, kLnRtol, "layernorm dgamma " + label);
    check_close(dbeta, dbeta_ref, kLnAtol, kLnRtol, "layernorm dbeta " + label);

    // Accumulate mode adds onto what is there; dx is always overwritten.
    std::vector<double> dgamma_twice(cols), dbeta_twice(cols);
    for (std::int64_t j = 0; j < cols; ++j) {
      dgamma_twice[j] = 2 * dgamma_ref[j];
      dbeta_twice[j] = 2 * dbeta_ref[j];
    }
    std::fill(dx.begin(), dx.end(), std::numeric_limits<float>::quiet_NaN());
    zl::layernorm_backward(kCpu, x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(),
                           dx.data(), dgamma.data(), dbeta.data(), rows, cols,
                           zl::Accumulate::Add);
    check_close(dx, dx_ref, kLnAtol, kLnRtol, "layernorm dx (Add mode) " + label);
    check_close(dgamma, dgamma_twice, kLnAtol, kLnRtol, "layernorm dgamma += " + label);
    check_close(dbeta, dbeta_twice, kLnAtol, kLnRtol, "layernorm dbeta += " + label);
  }
}

namespace {

struct CeRef {
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  std::vector<double> dlogits;
};

CeRef softmax_ce_ref(const std::vector<float>& logits, const std::vector<std::int32_t>& labels,
                     std::int64_t rows, std::int64_t cols, double grad_scale) {
  CeRef r;
  r.dlogits.resize(logits.size());
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* xr = &logits[i * cols];
    double mx = xr[0];
    std::int64_t arg = 0;
    for (std::int64_t j = 1; j < cols; ++j) {
      if (xr[j] > mx) {
        mx = xr[j];
        arg = j;
      }
    }
    double z = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) z += std::exp(xr[j] - mx);
    r.loss_sum += mx + std::log(z) - xr[labels[i]];
    r.correct += arg == labels[i] ? 1 : 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      r.dlogits[i * cols + j] = (std::exp(xr[j] - mx) / z - (j == labels[i] ? 1.0 : 0.0)) * grad_scale;
    }
  }
  return r;
}

}  // namespace

TEST_CASE("softmax_cross_entropy matches the reference", "[kernels][elementwise]") {
  for (const auto& [rows, cols] : kShapes) {
    for (const float spread : {3.0f, 1e4f}) {  // 1e4: exp would overflow without the max shift
      std::mt19937 rng(static_cast<unsigned>(rows * 31 + cols));
      const std::vector<float> logits = random_floats(rows * cols, rng, -spread, spread);
      std::vector<std::int32_t> labels(rows);
      std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(cols - 1));
      for (auto& l : labels) l = pick(rng);
      const float grad_scale = 1.0f / static_cast<float>(rows);
      const CeRef ref = softmax_ce_ref(logits, labels, rows, cols, grad_scale);
      const std::string label =
          std::to_string(rows) + "x" + std::to_string(cols) + " spread " + std::to_string(spread);

      std::vector<float> dlogits(logits.size(), std::numeric_limits<float>::quiet_NaN());
      std::int64_t correct = -1;
      const double loss = zl::softmax_cross_entropy(kCpu, logits.data(), labels.data(), rows, cols,
                                                    dlogits.data(), grad_scale, &correct);
      INFO(label);
      REQUIRE(std::isfinite(loss));
      CHECK(loss == Approx(ref.loss_sum).epsilon(1e-5).margin(1e-5));
      CHECK(correct == ref.correct);
      check_close(dlogits, ref.dlogits, kAtol, kRtol, "dlogits " + label);

      // No gradient, no count: the loss alone.
      const double loss_only = zl::softmax_cross_entropy(kCpu, logits.data(), labels.data(), rows,
                                                         cols, nullptr, grad_scale, nullptr);
      CHECK(loss_only == Approx(ref.loss_sum).epsilon(1e-5).margin(1e-5));
      // dlogits may overwrite the logits in place.
      std::vector<float> in_place = logits;
      zl::softmax_cross_entropy(kCpu, in_place.data(), labels.data(), rows, cols, in_place.data(),
                                grad_scale, nullptr);
      check_close(in_place, ref.dlogits, kAtol, kRtol, "dlogits in place " + label);
    }
  }
}

TEST_CASE("softmax_cross_entropy is stable for huge logits", "[kernels][elementwise]") {
  // Row 0: the label holds the huge logit (loss ~ 0); row 1: the label is 1e30 below (loss 1e30,
  // finite in double); row 2: all equal (loss log 3, uniform softmax).
  const std::vector<float> logits = {3e38f, -3e38f, 0.0f, 1e30f, 0.0f, -1.0f, 5e37f, 5e37f, 5e37f};
  const std::vector<std::int32_t> labels = {0, 1, 2};
  std::vector<float> dlogits(logits.size());
  std::int64_t correct = 0;
  const double loss = zl::softmax_cross_entropy(kCpu, logits.data(), labels.data(), 3, 3,
                                                dlogits.data(), 1.0f, &correct);
  REQUIRE(std::isfinite(loss));
  CHECK(loss == Approx(1e30 + 0.0 + std::log(3.0)).epsilon(1e-6));
  CHECK(correct == 1);  // row 0 only; row 2 ties and argmax takes the first index, as torch
  for (const float d : dlogits) REQUIRE(std::isfinite(d));
  CHECK(dlogits[0] == Approx(0.0).margin(1e-7));
  CHECK(dlogits[3] == Approx(1.0).margin(1e-7));
  CHECK(dlogits[4] == Approx(-1.0).margin(1e-7));
  CHECK(dlogits[8] == Approx(1.0 / 3.0 - 1.0).margin(1e-6));
}

TEST_CASE("softmax_cross_entropy rejects labels outside [0, cols)", "[kernels][elementwise]") {
  const std::vector<float> logits(3 * 4, 0.5f);
  std::vector<float> dlogits(logits.size(), 7.0f);
  for (const std::int32_t bad : {-1, 4, 1000}) {
    const std::vector<std::int32_t> labels = {0, 3, bad};
    INFO("label " << bad);
    REQUIRE_THROWS_MATCHES(
        zl::softmax_cross_entropy(kCpu, logits.data(), labels.data(), 3, 4, dlogits.data(), 1.0f,
                                  nullptr),
        zl::UserError,
        Catch::Matchers::Predicate<zl::UserError>(
            [bad](const zl::UserError& e) {
              const std::string msg = e.what();
              return msg.find("row 2") != std::string::npos &&
                     msg.find("label " + std::to_string(bad)) != std::string::npos;
            },
            "message names row 2 and the label"));
    // Validated before any row is written.
    for (const float d : dlogits) REQUIRE(d == 7.0f);
  }
}

TEST_CASE("squared_error, sum_of_squares and scale", "[kernels][elementwise]") {
  for (const std::int64_t n : {0, 1, 7, 1031}) {
    std::mt19937 rng(static_cast<unsigned>(n) + 41u);
    const std::vector<float> pred = random_floats(n, rng, -3.0f, 3.0f);
    const std::vector<float> target = random_floats(n, rng, -3.0f, 3.0f);
    const float grad_scale = 0.125f;
    double se = 0.0, ss = 0.0;
    std::vector<double> dpred_ref(pred.size()), scaled_ref(pred.size());
    for (std::size_t i = 0; i < pred.size(); ++i) {
      const double d = static_cast<double>(pred[i]) - target[i];
      se += d * d;
      ss += static_cast<double>(pred[i]) * pred[i];
      dpred_ref[i] = 2.0 * d * grad_scale;
      scaled_ref[i] = static_cast<double>(pred[i]) * -1.5;
    }
    INFO("n=" << n);
    std::vector<float> dpred(pred.size(), std::numeric_limits<float>::quiet_NaN());
    // Both sums are accumulated in double: only summation order may differ from the reference.
    CHECK(zl::squared_error(kCpu, pred.data(), target.data(), n, dpred.data(), grad_scale) ==
          Approx(se).epsilon(1e-12).margin(1e-12));
    check_close(dpred, dpred_ref, kAtol, kRtol, "dpred n=" + std::to_string(n));
    CHECK(zl::squared_error(kCpu, pred.data(), target.data(), n, nullptr, grad_scale) ==
          Approx(se).epsilon(1e-12).margin(1e-12));
    CHECK(zl::sum_of_squares(kCpu, pred.data(), n) == Approx(ss).epsilon(1e-12).margin(1e-12));

    std::vector<float> x = pred;
    zl::scale(kCpu, x.data(), n, -1.5f);
    check_close(x, scaled_ref, 0.0, 1e-7, "scale n=" + std::to_string(n));
  }
  {
    // The order is part of the contract (bitwise-reproducible norms on every CPU, every ISA
    // clone): 8 double lanes, element i into lane i % 8, the n % 8 last into a tail sum, then
    // the lanes 0..7 added to the tail.
    std::mt19937 rng(43);
    const std::vector<float> x = random_floats(1000 + 5, rng, -3.0f, 3.0f);
    double lanes[8] = {}, tail = 0.0;
    for (std::size_t i = 0; i < 1000; ++i) lanes[i % 8] += static_cast<double>(x[i]) * x[i];
    for (std::size_t i = 1000; i < x.size(); ++i) tail += static_cast<double>(x[i]) * x[i];
    for (const double lane : lanes) tail += lane;
    CHECK(zl::sum_of_squares(kCpu, x.data(), static_cast<std::int64_t>(x.size())) == tail);
  }
  {
    // Longer than a block (2^16 elements): the blocks' lane sums, added in block order from 0.0
    // (a different order, e.g. lanes running across blocks, differs in the last bits).
    constexpr std::size_t kBlock = std::size_t{1} << 16;
    std::mt19937 rng(47);
    const std::vector<float> x = random_floats(3 * kBlock + 1005, rng, -3.0f, 3.0f);
    double total = 0.0;
    for (std::size_t begin = 0; begin < x.size(); begin += kBlock) {
      const std::size_t end = std::min(x.size(), begin + kBlock);
      const std::size_t whole = begin + (end - begin) / 8 * 8;
      double lanes[8] = {}, block = 0.0;
      for (std::size_t i = begin; i < whole; ++i) {
        lanes[(i - begin) % 8] += static_cast<double>(x[i]) * x[i];
      }
      for (std::size_t i = whole; i < end; ++i) block += static_cast<double>(x[i]) * x[i];
      for (const double lane : lanes) block += lane;
      total += block;
    }
    CHECK(zl::sum_of_squares(kCpu, x.data(), static_cast<std::int64_t>(x.size())) == total);
  }
  // Double accumulation: 2^24 + 1 ones would stall at 2^24 in a float sum.
  const std::vector<float> ones((1 << 24) + 1, 1.0f);
  CHECK(zl::sum_of_squares(kCpu, ones.data(), static_cast<std::int64_t>(ones.size())) ==
        static_cast<double>((1 << 24) + 1));
}

TEST_CASE("the accumulating losses add what the returning ones return; take_device_sums zeroes",
          "[kernels][elementwise]") {
  std::mt19937 rng(77);
  const std::int64_t rows = 9, cols = 5, n = rows * cols;
  const std::vector<float> logits = random_floats(n, rng, -2.0f, 2.0f);
  const std::vector<float> target = random_floats(n, rng, -2.0f, 2.0f);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % cols);
  }

  std::int64_t correct = 0;
  std::vector<float> dlogits_ref(static_cast<std::size_t>(n)), dlogits(dlogits_ref.size());
  const double ce = zl::softmax_cross_entropy(kCpu, logits.data(), labels.data(), rows, cols,
                                              dlogits_ref.data(), 0.5f, &correct);
  std::vector<float> dpred_ref(static_cast<std::size_t>(n)), dpred(static_cast<std::size_t>(n));
  const double se =
      zl::squared_error(kCpu, logits.data(), target.data(), n, dpred_ref.data(), 0.25f);

  double sums[zl::kLossSumCount] = {1.0, 2.0, 0.0};  // adds to what is there
  zl::softmax_cross_entropy_accumulate(kCpu, logits.data(), labels.data(), rows, cols,
                                       dlogits.data(), 0.5f, sums);
  CHECK(sums[0] == 1.0 + ce / static_cast<double>(rows));
  CHECK(sums[1] == 2.0 + static_cast<double>(correct));
  CHECK(sums[2] == 0.0);
  CHECK(dlogits == dlogits_ref);
  zl::squared_error_accumulate(kCpu, logits.data(), target.data(), n, dpred.data(), 0.25f, 3.0,
                               sums);
  CHECK(sums[0] == (1.0 + ce / static_cast<double>(rows)) + se / 3.0);
  CHECK(dpred == dpred_ref);

  double host[zl::kLossSumCount] = {};
  const double before0 = sums[0], before1 = sums[1];
  zl::take_device_sums(kCpu, sums, host, zl::kLossSumCount);
  CHECK(host[0] == before0);
  CHECK(host[1] == before1);
  CHECK((sums[0] == 0.0 && sums[1] == 0.0 && sums[2] == 0.0));

  labels[3] = static_cast<std::int32_t>(cols);  // the CPU rejects a bad label at once
  CHECK_THROWS_AS(zl::softmax_cross_entropy_accumulate(kCpu, logits.data(), labels.data(), rows,
                                                       cols, dlogits.data(), 0.5f, sums),
                  zl::UserError);
}

TEST_CASE("total_sum_of_squares adds the spans' sums in span order", "[kernels][elementwise]") {
  std::mt19937 rng(78);
  const std::vector<float> a = random_floats(1031, rng), b = random_floats(7, rng);
  const std::vector<zl::FloatSpan> spans = {{a.data(), 1031}, {nullptr, 0}, {b.data(), 7}};
  const double expected = (0.0 + zl::sum_of_squares(kCpu, a.data(), 1031)) + 0.0 +
                          zl::sum_of_squares(kCpu, b.data(), 7);
  CHECK(zl::total_sum_of_squares(kCpu, spans.data(), 3) == expected);  // bitwise: same order
  CHECK(zl::total_sum_of_squares(kCpu, spans.data(), 0) == 0.0);
}

TEST_CASE("the CPU kernels split across threads (ExecContext::cpu_threads) give the same bits",
          "[kernels][elementwise]") {
  // 130 x 1541: three chunks of at least 2^16 elements by rows, by columns and by elements; an
  // odd width, so no row starts on a vector boundary.
  const std::int64_t rows = 130, cols = 1541, n = rows * cols;
  zl::ExecContext three{};
  three.cpu_threads = 3;
  const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  std::mt19937 rng(97);
  const std::vector<float> x = random_floats(n, rng, -3.0f, 3.0f);
  const std::vector<float> dy = random_floats(n, rng);
  const std::vector<float> bias = random_floats(cols, rng);
  for (const zl::Activation act : kActivations) {
    INFO(act_name(act));
    std::vector<float> y1(x.size()), y3(x.size()), dx1(x.size()), dx3(x.size());
    zl::bias_activation_forward(kCpu, act, x.data(), bias.data(), y1.data(), rows, cols);
    zl::bias_activation_forward(three, act, x.data(), bias.data(), y3.data(), rows, cols);
    CHECK(same_bits(y1, y3));
    zl::activation_backward(kCpu, act, x.data(), dy.data(), dx1.data(), n);
    zl::activation_backward(three, act, x.data(), dy.data(), dx3.data(), n);
    CHECK(same_bits(dx1, dx3));
  }
  for (const zl::Accumulate acc : {zl::Accumulate::Overwrite, zl::Accumulate::Add}) {
    std::vector<float> db1 = bias, db3 = bias;
    zl::bias_backward(kCpu, dy.data(), db1.data(), rows, cols, acc);
    zl::bias_backward(three, dy.data(), db3.data(), rows, cols, acc);
    CHECK(same_bits(db1, db3));
    std::vector<float> out1 = x, out3 = x;
    zl::accumulate(kCpu, dy.data(), out1.data(), n, acc);
    zl::accumulate(three, dy.data(), out3.data(), n, acc);
    CHECK(same_bits(out1, out3));
  }
  std::vector<float> sum1(x.size()), sum3(x.size());
  zl::add(kCpu, x.data(), dy.data(), sum1.data(), n);
  zl::add(three, x.data(), dy.data(), sum3.data(), n);
  CHECK(same_bits(sum1, sum3));
  zl::scale(kCpu, sum1.data(), n, -0.37f);
  zl::scale(three, sum3.data(), n, -0.37f);
  CHECK(same_bits(sum1, sum3));
  std::vector<zl::Bf16> h1(x.size()), h3(x.size());
  zl::cast(kCpu, x.data(), h1.data(), n);
  zl::cast(three, x.data(), h3.data(), n);
  CHECK(std::memcmp(h1.data(), h3.data(), h1.size() * sizeof(zl::Bf16)) == 0);
  std::vector<float> back1(x.size()), back3(x.size());
  zl::cast(kCpu, h1.data(), back1.data(), n);
  zl::cast(three, h1.data(), back3.data(), n);
  CHECK(same_bits(back1, back3));

  // The sum of squares is split at fixed blocks, not per thread: the same double, bit for bit,
  // at any thread count, and still the exact sum up to double rounding.
  double reference = 0.0;
  for (const float v : x) reference += static_cast<double>(v) * v;
  const double one = zl::sum_of_squares(kCpu, x.data(), n);
  CHECK(zl::sum_of_squares(three, x.data(), n) == one);
  zl::ExecContext two{};
  two.cpu_threads = 2;
  CHECK(zl::sum_of_squares(two, x.data(), n) == one);
  CHECK(one == Approx(reference).epsilon(1e-12));
  const std::vector<zl::FloatSpan> spans = {{x.data(), n}, {dy.data(), n}};
  CHECK(zl::total_sum_of_squares(three, spans.data(), 2) ==
        zl::total_sum_of_squares(kCpu, spans.data(), 2));
}

#if !defined(ZEROLAP_WITH_CUDA)
TEST_CASE("elementwise kernels refuse CUDA contexts in a CPU-only build", "[kernels][elementwise]") {
  const zl::ExecContext cuda{zl::DeviceKind::Cuda, nullptr, nullptr};
  std::vector<float> x(4, 1.0f);
  REQUIRE_THROWS_AS(zl::scale(cuda, x.data(), 4, 2.0f), zl::UserError);
  REQUIRE_THROWS_WITH(zl::sum_of_squares(cuda, x.data(), 4),
                      Catch::Matchers::Contains("built without CUDA"));
  REQUIRE_THROWS_AS(zl::bias_activation_forward(cuda, zl::Activation::Relu, x.data(), nullptr,
                                                x.data(), 2, 2),
                    zl::UserError);
  CHECK(x == std::vector<float>(4, 1.0f));  // nothing ran on the CPU instead
}
#endif
