// The bf16 instances of the element-wise and row-wise kernels (CPU). Two checks per kernel:
// 1. Exactness: on inputs that are bf16 values, the bf16 kernel's output is the fp32 kernel's
//    output on the same values rounded once to bf16 (bitwise), and its fp32 outputs (parameter
//    gradients, LayerNorm statistics, losses) equal the fp32 kernel's bitwise: loads widen exactly
//    and the fp32 arithmetic is the same. (The fp32 kernels have their own reference tests.)
// 2. Accuracy against the fp32 model: on unrounded fp32 inputs, the bf16 kernel (inputs rounded
//    to bf16 first) stays within atol + |ref| * rtol of the fp32 kernel. Tolerance: bf16's unit
//    roundoff is u = 2^-8; an element-wise result sees at most 3 input roundings and 1 output
//    rounding, each a relative error <= u times a condition number that is <= 2 for these
//    functions on [-3, 3], so rtol = 8u = 2^-5. Sums that cancel (LayerNorm's centring, the
//    gradient's mean removal, column sums) lose the relative bound: their absolute error is at
//    most u times the sum of |terms|, bounded here by atol = 8u * max|ref| of the tensor.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/bf16.h"
#include "base/exec_context.h"
#include "kernels/elementwise.h"
#include "kernel_test_util.h"

namespace {

using zl::Accumulate;
using zl::Activation;
using zl::Bf16;

constexpr double kRtol = 1.0 / 32.0;  // 8u, u = 2^-8

std::vector<Bf16> to_bf16(const std::vector<float>& v) {
  std::vector<Bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = zl::float_to_bf16(v[i]);
  return out;
}

std::vector<float> widen(const std::vector<Bf16>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = zl::bf16_to_float(v[i]);
  return out;
}

// bf16 output == fp32 output rounded once, bit for bit.
void check_rounded(const std::vector<Bf16>& got, const std::vector<float>& fp32,
                   const std::string& what) {
  REQUIRE(got.size() == fp32.size());
  std::int64_t bad = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i].bits != zl::float_to_bf16(fp32[i]).bits && bad++ == 0) first = i;
  }
  INFO(what << ": " << bad << " of " << got.size() << " differ; first at " << first);
  CHECK(bad == 0);
}

void check_bitwise(const std::vector<float>& a, const std::vector<float>& b,
                   const std::string& what) {
  INFO(what);
  REQUIRE(a.size() == b.size());
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// bf16 result vs the fp32 model's, under the header's tolerance.
void check_accuracy(const std::vector<float>& got, const std::vector<float>& fp32,
                    const std::string& what) {
  double max_ref = 0.0;
  for (const float v : fp32) max_ref = std::max(max_ref, std::fabs(static_cast<double>(v)));
  zl::test::check_close(got, zl::test::to_double(fp32), kRtol * max_ref, kRtol, what);
}

}  // namespace

TEST_CASE("bf16 activations are the fp32 ones rounded once", "[kernels][bf16]") {
  const zl::ExecContext cpu{};
  const std::int64_t rows = 37, cols = 53, n = rows * cols;
  std::mt19937 rng(11);
  const std::vector<float> x = zl::test::random_floats(n, rng, -3.0f, 3.0f);
  const std::vector<float> bias = zl::test::random_floats(cols, rng);
  const std::vector<float> dy = zl::test::random_floats(n, rng);
  const std::vector<Bf16> xb = to_bf16(x), bb = to_bf16(bias), dyb = to_bf16(dy);
  const std::vector<float> xr = widen(xb), br = widen(bb), dyr = widen(dyb);
  for (const Activation act :
       {Activation::Identity, Activation::Relu, Activation::Gelu, Activation::Tanh}) {
    const std::string name = "act " + std::to_string(static_cast<int>(act));
    std::vector<float> y32(n), y_exact(n);
    std::vector<Bf16> y16(n);
    zl::bias_activation_forward(cpu, act, xb.data(), bb.data(), y16.data(), rows, cols);
    zl::bias_activation_forward(cpu, act, xr.data(), br.data(), y_exact.data(), rows, cols);
    check_rounded(y16, y_exact, name + " forward");
    zl::bias_activation_forward(cpu, act, x.data(), bias.data(), y32.data(), rows, cols);
    check_accuracy(widen(y16), y32, name + " forward vs fp32");
    // In place, no bias.
    std::vector<Bf16> in_place = xb;
    zl::bias_activation_forward(cpu, act, in_place.data(), nullptr, in_place.data(), rows, cols);
    zl::bias_activation_forward(cpu, act, xr.data(), nullptr, y_exact.data(), rows, cols);
    check_rounded(in_place, y_exact, name + " forward in place");

    std::vector<Bf16> dx16(n);
    std::vector<float> dx_exact(n), dx32(n);
    zl::activation_backward(cpu, act, xb.data(), dyb.data(), dx16.data(), n);
    zl::activation_backward(cpu, act, xr.data(), dyr.data(), dx_exact.data(), n);
    check_rounded(dx16, dx_exact, name + " backward");
    zl::activation_backward(cpu, act, x.data(), dy.data(), dx32.data(), n);
    check_accuracy(widen(dx16), dx32, name + " backward vs fp32");
  }
}

TEST_CASE("bf16 bias_backward, add, accumulate, scale and casts", "[kernels][bf16]") {
  const zl::ExecContext cpu{};
  const std::int64_t rows = 129, cols = 19, n = rows * cols;
  std::mt19937 rng(5);
  const std::vector<float> a = zl::test::random_floats(n, rng), b = zl::test::random_floats(n, rng);
  const std::vector<Bf16> ab = to_bf16(a), bb = to_bf16(b);
  const std::vector<float> ar = widen(ab), br = widen(bb);

  for (const Accumulate acc : {Accumulate::Overwrite, Accumulate::Add}) {
    std::vector<float> db16(cols, 0.5f), db_exact(cols, 0.5f), db32(cols, 0.5f);
    zl::bias_backward(cpu, ab.data(), db16.data(), rows, cols, acc);  // fp32 out
    zl::bias_backward(cpu, ar.data(), db_exact.data(), rows, cols, acc);
    check_bitwise(db16, db_exact, "bias_backward");
    zl::bias_backward(cpu, a.data(), db32.data(), rows, cols, acc);
    check_accuracy(db16, db32, "bias_backward vs fp32");
  }

  std::vector<Bf16> sum16(n);
  std::vector<float> sum_exact(n);
  zl::add(cpu, ab.data(), bb.data(), sum16.data(), n);
  zl::add(cpu, ar.data(), br.data(), sum_exact.data(), n);
  check_rounded(sum16, sum_exact, "add");

  std::vector<Bf16> acc16 = bb;
  std::vector<float> acc_exact = br;
  zl::accumulate(cpu, ab.data(), acc16.data(), n, Accumulate::Add);
  zl::accumulate(cpu, ar.data(), acc_exact.data(), n, Accumulate::Add);
  check_rounded(acc16, acc_exact, "accumulate +=");
  zl::accumulate(cpu, ab.data(), acc16.data(), n, Accumulate::Overwrite);
  check_rounded(acc16, ar, "accumulate =");

  std::vector<Bf16> scaled = ab;
  std::vector<float> scaled_exact = ar;
  zl::scale(cpu, scaled.data(), n, 0.37f);
  zl::scale(cpu, scaled_exact.data(), n, 0.37f);
  check_rounded(scaled, scaled_exact, "scale");

  CHECK(zl::sum_of_squares(cpu, ab.data(), n) == zl::sum_of_squares(cpu, ar.data(), n));

  std::vector<Bf16> cast16(n);
  zl::cast(cpu, a.data(), cast16.data(), n);
  check_rounded(cast16, a, "cast fp32 -> bf16");
  std::vector<float> back(n);
  zl::cast(cpu, cast16.data(), back.data(), n);
  check_bitwise(back, widen(cast16), "cast bf16 -> fp32");
}

TEST_CASE("bf16 layernorm: fp32 statistics and parameter gradients", "[kernels][bf16]") {
  const zl::ExecContext cpu{};
  const std::int64_t rows = 23, cols = 96, n = rows * cols;
  std::mt19937 rng(9);
  const std::vector<float> x = zl::test::random_floats(n, rng, -2.0f, 3.0f);
  const std::vector<float> gamma = zl::test::random_floats(cols, rng, 0.5f, 1.5f);
  const std::vector<float> beta = zl::test::random_floats(cols, rng);
  const std::vector<float> dy = zl::test::random_floats(n, rng);
  const std::vector<Bf16> xb = to_bf16(x), gb = to_bf16(gamma), bb = to_bf16(beta),
                          dyb = to_bf16(dy);
  const std::vector<float> xr = widen(xb), gr = widen(gb), br = widen(bb), dyr = widen(dyb);

  std::vector<Bf16> y16(n);
  std::vector<float> mean16(rows), rstd16(rows), y_exact(n), mean_e(rows), rstd_e(rows), y32(n),
      mean32(rows), rstd32(rows);
  zl::layernorm_forward(cpu, xb.data(), gb.data(), bb.data(), y16.data(), mean16.data(),
                        rstd16.data(), rows, cols, 1e-5f);
  zl::layernorm_forward(cpu, xr.data(), gr.data(), br.data(), y_exact.data(), mean_e.data(),
                        rstd_e.data(), rows, cols, 1e-5f);
  check_rounded(y16, y_exact, "layernorm y");
  check_bitwise(mean16, mean_e, "layernorm mean");
  check_bitwise(rstd16, rstd_e, "layernorm rstd");
  zl::layernorm_forward(cpu, x.data(), gamma.data(), beta.data(), y32.data(), mean32.data(),
                        rstd32.data(), rows, cols, 1e-5f);
  check_accuracy(widen(y16), y32, "layernorm y vs fp32");
  check_accuracy(mean16, mean32, "layernorm mean vs fp32");
  check_accuracy(rstd16, rstd32, "layernorm rstd vs fp32");

  for (const Accumulate acc : {Accumulate::Overwrite, Accumulate::Add}) {
    std::vector<Bf16> dx16(n);
    std::vector<float> dg16(cols, 0.25f), dbt16(cols, 0.25f), dx_e(n), dg_e(cols, 0.25f),
        dbt_e(cols, 0.25f), dx32(n), dg32(cols, 0.25f), dbt32(cols, 0.25f);
    zl::layernorm_backward(cpu, xb.data(), gb.data(), mean16.data(), rstd16.data(), dyb.data(),
                           dx16.data(), dg16.data(), dbt16.data(), rows, cols, acc);
    zl::layernorm_backward(cpu, xr.data(), gr.data(), mean_e.data(), rstd_e.data(), dyr.data(),
                           dx_e.data(), dg_e.data(), dbt_e.data(), rows, cols, acc);
    check_rounded(dx16, dx_e, "layernorm dx");
    check_bitwise(dg16, dg_e, "layernorm dgamma");
    check_bitwise(dbt16, dbt_e, "layernorm dbeta");
    zl::layernorm_backward(cpu, x.data(), gamma.data(), mean32.data(), rstd32.data(), dy.data(),
                           dx32.data(), dg32.data(), dbt32.data(), rows, cols, acc);
    check_accuracy(widen(dx16), dx32, "layernorm dx vs fp32");
    check_accuracy(dg16, dg32, "layernorm dgamma vs fp32");
    check_accuracy(dbt16, dbt32, "layernorm dbeta vs fp32");
  }
}

TEST_CASE("bf16 losses: fp32 sums, gradients rounded once", "[kernels][bf16]") {
  const zl::ExecContext cpu{};
  const std::int64_t rows = 41, cols = 10, n = rows * cols;
  std::mt19937 rng(13);
  const std::vector<float> logits = zl::test::random_floats(n, rng, -4.0f, 4.0f);
  std::vector<std::int32_t> labels(rows);
  for (std::int64_t i = 0; i < rows; ++i) labels[i] = static_cast<std::int32_t>(rng() % cols);
  const std::vector<Bf16> lb = to_bf16(logits);
  const std::vector<float> lr = widen(lb);

  std::vector<Bf16> d16(n);
  std::vector<float> d_exact(n), d32(n);
  std::int64_t c16 = 0, c_exact = 0, c32 = 0;
  const double loss16 = zl::softmax_cross_entropy(cpu, lb.data(), labels.data(), rows, cols,
                                                  d16.data(), 1.0f / rows, &c16);
  const double loss_exact = zl::softmax_cross_entropy(cpu, lr.data(), labels.data(), rows, cols,
                                                      d_exact.data(), 1.0f / rows, &c_exact);
  CHECK(loss16 == loss_exact);
  CHECK(c16 == c_exact);
  check_rounded(d16, d_exact, "softmax_cross_entropy dlogits");
  const double loss32 = zl::softmax_cross_entropy(cpu, logits.data(), labels.data(), rows, cols,
                                                  d32.data(), 1.0f / rows, &c32);
  // Each row's loss, lse(x) - x_label, moves by <= 2 * 4u when every logit moves by <= u |x| <= 4u;
  // the bound below allows 4 times that per row.
  CHECK(std::fabs(loss16 - loss32) <= 4.0 * 8.0 / 256.0 * rows);
  check_accuracy(widen(d16), d32, "softmax_cross_entropy dlogits vs fp32");
  // Without a gradient, and aliased (dlogits over logits).
  CHECK(zl::softmax_cross_entropy(cpu, lb.data(), labels.data(), rows, cols, nullptr, 1.0f,
                                  nullptr) == loss_exact);
  std::vector<Bf16> alias = lb;
  zl::softmax_cross_entropy(cpu, alias.data(), labels.data(), rows, cols, alias.data(),
                            1.0f / rows, nullptr);
  check_rounded(alias, d_exact, "softmax_cross_entropy in place");

  const std::vector<float> target = zl::test::random_floats(n, rng);
  std::vector<Bf16> dp16(n);
  std::vector<float> dp_exact(n);
  const double se16 = zl::squared_error(cpu, lb.data(), target.data(), n, dp16.data(), 0.5f);
  const double se_exact =
      zl::squared_error(cpu, lr.data(), target.data(), n, dp_exact.data(), 0.5f);
  CHECK(se16 == se_exact);
  check_rounded(dp16, dp_exact, "squared_error dpred");
  CHECK(zl::squared_error(cpu, lb.data(), target.data(), n, nullptr, 1.0f) == se_exact);
}

TEST_CASE("bf16 loss sums that stay on the device, and the bf16 gradient norm, are fp32 sums",
          "[kernels][bf16]") {
  // On bf16 values, the accumulating forms add exactly what the fp32 forms add (loads widen
  // exactly; the sums are double), and the gradients are the fp32 ones rounded once.
  const zl::ExecContext cpu{};
  const std::int64_t rows = 37, cols = 10, n = rows * cols;
  std::mt19937 rng(21);
  const std::vector<Bf16> lb = to_bf16(zl::test::random_floats(n, rng, -4.0f, 4.0f));
  const std::vector<float> lr = widen(lb);
  std::vector<std::int32_t> labels(rows);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng() % cols);
  double sums16[zl::kLossSumCount] = {}, sums32[zl::kLossSumCount] = {};
  std::vector<Bf16> d16(n);
  std::vector<float> d32(n);
  for (int call = 0; call < 2; ++call) {  // they add up
    zl::softmax_cross_entropy_accumulate(cpu, lb.data(), labels.data(), rows, cols, d16.data(),
                                         1.0f / rows, sums16);
    zl::softmax_cross_entropy_accumulate(cpu, lr.data(), labels.data(), rows, cols, d32.data(),
                                         1.0f / rows, sums32);
  }
  CHECK(sums16[0] == sums32[0]);
  CHECK(sums16[1] == sums32[1]);
  CHECK(sums16[0] > 0.0);
  check_rounded(d16, d32, "softmax_cross_entropy_accumulate dlogits");

  const std::vector<float> target = zl::test::random_floats(n, rng);
  double se16[1] = {0.5}, se32[1] = {0.5};
  std::vector<Bf16> dp16(n);
  std::vector<float> dp32(n);
  zl::squared_error_accumulate(cpu, lb.data(), target.data(), n, dp16.data(), 0.25f, 3.0, se16);
  zl::squared_error_accumulate(cpu, lr.data(), target.data(), n, dp32.data(), 0.25f, 3.0, se32);
  CHECK(se16[0] == se32[0]);
  CHECK(se16[0] > 0.5);
  check_rounded(dp16, dp32, "squared_error_accumulate dpred");

  // The clip norm over bf16 wire gradients: in double, span by span, as over their fp32 values.
  const std::vector<zl::ReadSpan<Bf16>> spans16 = {{lb.data(), 200}, {nullptr, 0},
                                                    {lb.data() + 200, n - 200}};
  const std::vector<zl::FloatSpan> spans32 = {{lr.data(), 200}, {nullptr, 0},
                                              {lr.data() + 200, n - 200}};
  const double norm16 = zl::total_sum_of_squares(cpu, spans16.data(), 3);
  CHECK(norm16 == zl::total_sum_of_squares(cpu, spans32.data(), 3));
  double reference = 0.0;
  for (const float v : lr) reference += static_cast<double>(v) * v;
  CHECK(norm16 == Approx(reference).epsilon(1e-12));
}
