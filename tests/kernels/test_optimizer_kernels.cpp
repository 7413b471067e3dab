// The fused optimizer kernels against a double-precision reference written here from docs/design.md's
// "Optimizer math" (not from kernels/optim_math.h), over 10 steps with a changing lr, on odd lengths
// so vector loop tails run; plus the padding invariance (zeros stay zeros) the bucket layout needs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/errors.h"
#include "base/exec_context.h"
#include "kernels/optimizer_kernels.h"
#include "kernel_test_util.h"

namespace {

using zl::test::check_close;
using zl::test::random_floats;
using zl::test::to_double;

constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-5;
constexpr int kSteps = 10;
constexpr std::int64_t kLengths[] = {1, 7, 1031};

// A scheduler-like lr that changes every step, so a kernel that caches lr would fail.
float lr_at(float base, std::int64_t t) { return base * (1.0f - 0.05f * static_cast<float>(t)); }

struct AdamCase {
  std::string name;
  zl::AdamHyper hyper;
  float grad_scale;
};

struct AdamRef {
  std::vector<double> p, m, v;
};

// docs/design.md, "Optimizer math": Adam: g = grad + wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
// p -= (lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps). AdamW: p *= (1 - lr*wd) first, no wd*p.
// grad is the raw gradient times grad_scale.
void adam_reference_step(AdamRef& r, const std::vector<float>& grad, const zl::AdamHyper& h,
                         double lr, std::int64_t t, double grad_scale) {
  const double b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(t));
  for (std::size_t i = 0; i < r.p.size(); ++i) {
    double g = grad[i] * grad_scale;
    if (h.decoupled_weight_decay) {
      r.p[i] *= 1.0 - lr * wd;
    } else {
      g += wd * r.p[i];
    }
    r.m[i] = b1 * r.m[i] + (1.0 - b1) * g;
    r.v[i] = b2 * r.v[i] + (1.0 - b2) * g * g;
    r.p[i] -= (lr / bc1) * r.m[i] / (std::sqrt(r.v[i]) / std::sqrt(bc2) + eps);
  }
}

struct SgdCase {
  std::string name;
  zl::SgdHyper hyper;
  float grad_scale;
};

// docs/design.md, "Optimizer math": d = grad + wd*p; with momentum: buf = d at t=1, else buf = mom*buf + (1-damp)*d;
// d = nesterov ? d + mom*buf : buf; p -= lr*d.
void sgd_reference_step(std::vector<double>& p, std::vector<double>& buf,
                        const std::vector<float>& grad, const zl::SgdHyper& h, double lr,
                        std::int64_t t, double grad_scale) {
  const double mom = h.momentum, damp = h.dampening, wd = h.weight_decay;
  for (std::size_t i = 0; i < p.size(); ++i) {
    double d = grad[i] * grad_scale + wd * p[i];
    if (mom != 0.0) {
      buf[i] = t == 1 ? d : mom * buf[i] + (1.0 - damp) * d;
      d = h.nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
}

std::vector<AdamCase> adam_cases() {
  std::vector<AdamCase> cases;
  zl::AdamHyper h;
  h.lr = 1e-2f;
  cases.push_back({"adam", h, 1.0f});
  h.weight_decay = 0.05f;
  cases.push_back({"adam+weight_decay", h, 1.0f});
  h.decoupled_weight_decay = true;
  h.weight_decay = 0.1f;
  cases.push_back({"adamw", h, 1.0f});
  // Betas far from 1 make the bias corrections differ visibly between steps.
  zl::AdamHyper b;
  b.lr = 3e-2f;
  b.beta1 = 0.5f;
  b.beta2 = 0.9f;
  b.eps = 1e-6f;
  cases.push_back({"adam betas (0.5, 0.9) grad_scale 0.25", b, 0.25f});
  b.decoupled_weight_decay = true;
  b.weight_decay = 0.2f;
  cases.push_back({"adamw betas (0.5, 0.9) grad_scale 0.5", b, 0.5f});
  return cases;
}

std::vector<SgdCase> sgd_cases() {
  std::vector<SgdCase> cases;
  zl::SgdHyper h;
  h.lr = 0.1f;
  cases.push_back({"sgd", h, 1.0f});
  h.weight_decay = 0.01f;
  cases.push_back({"sgd+weight_decay", h, 0.5f});
  h.weight_decay = 0.0f;
  h.momentum = 0.9f;
  cases.push_back({"sgd momentum", h, 1.0f});
  h.dampening = 0.1f;
  cases.push_back({"sgd momentum+dampening", h, 0.25f});
  h.dampening = 0.0f;
  h.nesterov = true;
  cases.push_back({"sgd nesterov", h, 1.0f});
  h.weight_decay = 0.05f;
  cases.push_back({"sgd nesterov+weight_decay grad_scale 0.5", h, 0.5f});
  h.nesterov = false;
  h.dampening = 0.3f;
  cases.push_back({"sgd momentum+dampening+weight_decay", h, 1.0f});
  return cases;
}

}  // namespace

TEST_CASE("adam_step_cpu matches the double reference for 10 steps", "[kernels][optimizer]") {
  const zl::ExecContext cpu{};
  for (const AdamCase& c : adam_cases()) {
    for (const std::int64_t n : kLengths) {
      for (const bool through_dispatch : {false, true}) {
        const std::string label = c.name + " n=" + std::to_string(n) +
                                  (through_dispatch ? " (adam_step)" : " (adam_step_cpu)");
        std::mt19937 rng(static_cast<unsigned>(n) * 7919u + 17u);
        std::vector<float> p = random_floats(n, rng);
        std::vector<float> m(static_cast<std::size_t>(n), 0.0f);
        std::vector<float> v(static_cast<std::size_t>(n), 0.0f);
        AdamRef ref{to_double(p), std::vector<double>(p.size(), 0.0),
                    std::vector<double>(p.size(), 0.0)};
        for (std::int64_t t = 1; t <= kSteps; ++t) {
          const std::vector<float> g = random_floats(n, rng, -2.0f, 2.0f);
          const float lr = lr_at(c.hyper.lr, t);
          const zl::AdamStep s = zl::make_adam_step(c.hyper, lr, t, c.grad_scale);
          if (through_dispatch) {
            zl::adam_step(cpu, p.data(), g.data(), m.data(), v.data(), n, s);
          } else {
            zl::adam_step_cpu(p.data(), g.data(), m.data(), v.data(), n, s);
          }
          adam_reference_step(ref, g, c.hyper, lr, t, c.grad_scale);
        }
        check_close(p, ref.p, kAtol, kRtol, label + " p");
        check_close(m, ref.m, kAtol, kRtol, label + " exp_avg");
        check_close(v, ref.v, kAtol, kRtol, label + " exp_avg_sq");
      }
    }
  }
}

TEST_CASE("sgd_step_cpu matches the double reference for 10 steps", "[kernels][optimizer]") {
  const zl::ExecContext cpu{};
  for (const SgdCase& c : sgd_cases()) {
    for (const std::int64_t n : kLengths) {
      for (const bool through_dispatch : {false, true}) {
        const std::string label = c.name + " n=" + std::to_string(n) +
                                  (through_dispatch ? " (sgd_step)" : " (sgd_step_cpu)");
        std::mt19937 rng(static_cast<unsigned>(n) * 104729u + 3u);
        std::vector<float> p = random_floats(n, rng);
        std::vector<float> buf(static_cast<std::size_t>(n), 0.0f);
        std::vector<double> ref_p = to_double(p);
        std::vector<double> ref_buf(p.size(), 0.0);
        // Without momentum the kernel must not need a buffer at all.
        float* buf_ptr = c.hyper.momentum != 0.0f ? buf.data() : nullptr;
        for (std::int64_t t = 1; t <= kSteps; ++t) {
          const std::vector<float> g = random_floats(n, rng, -2.0f, 2.0f);
          const float lr = lr_at(c.hyper.lr, t);
          const zl::SgdStep s = zl::make_sgd_step(c.hyper, lr, t, c.grad_scale);
          if (through_dispatch) {
            zl::sgd_step(cpu, p.data(), g.data(), buf_ptr, n, s);
          } else {
            zl::sgd_step_cpu(p.data(), g.data(), buf_ptr, n, s);
          }
          sgd_reference_step(ref_p, ref_buf, g, c.hyper, lr, t, c.grad_scale);
        }
        check_close(p, ref_p, kAtol, kRtol, label + " p");
        if (c.hyper.momentum != 0.0f) {
          check_close(buf, ref_buf, kAtol, kRtol, label + " momentum_buffer");
        }
      }
    }
  }
}

TEST_CASE("optimizer kernels keep zero padding at zero", "[kernels][optimizer]") {
  // Bucket storage pads with zeros (p = 0, g = 0, state = 0); no optimizer may move them, or
  // padding would leak into norms and checkpoints.
  constexpr std::int64_t n = 37;
  for (const AdamCase& c : adam_cases()) {
    std::vector<float> p(n, 0.0f), g(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
    for (std::int64_t t = 1; t <= kSteps; ++t) {
      zl::adam_step_cpu(p.data(), g.data(), m.data(), v.data(), n,
                        zl::make_adam_step(c.hyper, c.hyper.lr, t, c.grad_scale));
    }
    for (std::int64_t i = 0; i < n; ++i) {
      INFO(c.name << " element " << i);
      REQUIRE(p[i] == 0.0f);
      REQUIRE(m[i] == 0.0f);
      REQUIRE(v[i] == 0.0f);
    }
  }
  for (const SgdCase& c : sgd_cases()) {
    std::vector<float> p(n, 0.0f), g(n, 0.0f), buf(n, 0.0f);
    for (std::int64_t t = 1; t <= kSteps; ++t) {
      zl::sgd_step_cpu(p.data(), g.data(), buf.data(), n,
                       zl::make_sgd_step(c.hyper, c.hyper.lr, t, c.grad_scale));
    }
    for (std::int64_t i = 0; i < n; ++i) {
      INFO(c.name << " element " << i);
      REQUIRE(p[i] == 0.0f);
      REQUIRE(buf[i] == 0.0f);
    }
  }
}

TEST_CASE("optimizer kernels: empty slices, missing buffers, missing CUDA", "[kernels][optimizer]") {
  zl::SgdHyper h;
  h.momentum = 0.9f;
  const zl::SgdStep s = zl::make_sgd_step(h, 0.1f, 1, 1.0f);
  // n = 0 touches nothing, so null pointers are fine.
  zl::sgd_step_cpu(nullptr, nullptr, nullptr, 0, s);
  zl::adam_step_cpu(nullptr, nullptr, nullptr, nullptr, 0, zl::make_adam_step({}, 1e-3f, 1, 1.0f));

  std::vector<float> p(4, 1.0f), g(4, 1.0f);
  REQUIRE_THROWS_AS(zl::sgd_step_cpu(p.data(), g.data(), nullptr, 4, s), zl::InternalError);

#if !defined(ZEROLAP_WITH_CUDA)
  const zl::ExecContext cuda{zl::DeviceKind::Cuda, nullptr, nullptr};
  REQUIRE_THROWS_AS(zl::sgd_step(cuda, p.data(), g.data(), nullptr, 4, s), zl::UserError);
  std::vector<float> m(4, 0.0f), v(4, 0.0f);
  REQUIRE_THROWS_WITH(
      zl::adam_step(cuda, p.data(), g.data(), m.data(), v.data(), 4,
                    zl::make_adam_step({}, 1e-3f, 1, 1.0f)),
      Catch::Matchers::Contains("built without CUDA"));
#endif
}

TEST_CASE("the CPU steps compute the element functions' bits (Note [ISA clones])",
          "[kernels][optimizer]") {
  // adam_step / sgd_step run the widest clone this CPU has (AVX-512, AVX2 or the baseline); the
  // element functions of kernels/optim_math.h, called one element at a time here, are the
  // definition. A clone that fused a multiply-add, or approximated a division or sqrt, would
  // differ in the last bit somewhere.
  const zl::ExecContext kCpu{};
  const std::int64_t n = 4096 + 13;  // whole vectors of every width, and a tail
  for (const AdamCase& c : adam_cases()) {
    INFO(c.name);
    std::mt19937 rng(23);
    std::vector<float> p = random_floats(n, rng), m(p.size(), 0.0f), v = m;
    std::vector<float> pe = p, me = m, ve = v;
    for (std::int64_t t = 1; t <= 3; ++t) {
      const std::vector<float> g = random_floats(n, rng, -2.0f, 2.0f);
      const zl::AdamStep s = zl::make_adam_step(c.hyper, lr_at(c.hyper.lr, t), t, c.grad_scale);
      zl::adam_step(kCpu, p.data(), g.data(), m.data(), v.data(), n, s);
      for (std::int64_t i = 0; i < n; ++i) zl::adam_update(pe[i], g[i], me[i], ve[i], s);
    }
    CHECK(std::memcmp(p.data(), pe.data(), p.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(m.data(), me.data(), m.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(v.data(), ve.data(), v.size() * sizeof(float)) == 0);
  }
  for (const SgdCase& c : sgd_cases()) {
    INFO(c.name);
    std::mt19937 rng(29);
    std::vector<float> p = random_floats(n, rng), buf(p.size(), 0.0f);
    std::vector<float> pe = p, bufe = buf;
    const bool momentum = c.hyper.momentum != 0.0f;
    for (std::int64_t t = 1; t <= 3; ++t) {
      const std::vector<float> g = random_floats(n, rng, -2.0f, 2.0f);
      const zl::SgdStep s = zl::make_sgd_step(c.hyper, lr_at(c.hyper.lr, t), t, c.grad_scale);
      zl::sgd_step(kCpu, p.data(), g.data(), momentum ? buf.data() : nullptr, n, s);
      for (std::int64_t i = 0; i < n; ++i) zl::sgd_update(pe[i], g[i], bufe[i], s);
    }
    CHECK(std::memcmp(p.data(), pe.data(), p.size() * sizeof(float)) == 0);
    if (momentum) CHECK(std::memcmp(buf.data(), bufe.data(), buf.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("the CPU step split across threads (ExecContext::cpu_threads) gives the same bits",
          "[kernels][optimizer]") {
  // Long enough for 3 chunks of at least 2^16 elements, and not a multiple of 16.
  const std::int64_t n = 3 * (std::int64_t{1} << 16) + 12345;
  const zl::ExecContext one{};
  zl::ExecContext three{};
  three.cpu_threads = 3;
  for (const AdamCase& c : adam_cases()) {
    INFO(c.name);
    std::mt19937 rng(11);
    const std::vector<float> p0 = random_floats(n, rng);
    std::vector<float> p1 = p0, m1(p0.size(), 0.0f), v1(p0.size(), 0.0f);
    std::vector<float> p3 = p0, m3 = m1, v3 = v1;
    for (std::int64_t t = 1; t <= 3; ++t) {
      const std::vector<float> g = random_floats(n, rng, -2.0f, 2.0f);
      const zl::AdamStep s = zl::make_adam_step(c.hyper, lr_at(c.hyper.lr, t), t, c.grad_scale);
      zl::adam_step(one, p1.data(), g.data(), m1.data(), v1.data(), n, s);
      zl::adam_step(three, p3.data(), g.data(), m3.data(), v3.data(), n, s);
    }
    CHECK(std::memcmp(p1.data(), p3.data(), p1.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(m1.data(), m3.data(), m1.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(v1.data(), v3.data(), v1.size() * sizeof(float)) == 0);
  }
  for (const SgdCase& c : sgd_cases()) {
    INFO(c.name);
    std::mt19937 rng(13);
    const std::vector<float> p0 = random_floats(n, rng);
    std::vector<float> p1 = p0, b1(p0.size(), 0.0f), p3 = p0, b3 = b1;
    const bool momentum = c.hyper.momentum != 0.0f;
    for (std::int64_t t = 1; t <= 3; ++t) {
      const std::vector<float> g = random_floats(n, rng, -2.0f, 2.0f);
      const zl::SgdStep s = zl::make_sgd_step(c.hyper, lr_at(c.hyper.lr, t), t, c.grad_scale);
      zl::sgd_step(one, p1.data(), g.data(), momentum ? b1.data() : nullptr, n, s);
      zl::sgd_step(three, p3.data(), g.data(), momentum ? b3.data() : nullptr, n, s);
    }
    CHECK(std::memcmp(p1.data(), p3.data(), p1.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(b1.data(), b3.data(), b1.size() * sizeof(float)) == 0);
  }
  // A missing momentum buffer is still a clear error on the calling thread, not a crash.
  zl::SgdHyper momentum_sgd;
  momentum_sgd.momentum = 0.9f;
  std::vector<float> p(static_cast<std::size_t>(n), 1.0f), g = p;
  CHECK_THROWS_AS(zl::sgd_step(three, p.data(), g.data(), nullptr, n,
                               zl::make_sgd_step(momentum_sgd, 0.1f, 1, 1.0f)),
                  zl::InternalError);
}
