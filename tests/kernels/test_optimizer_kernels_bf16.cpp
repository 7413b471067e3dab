// The bf16 fused optimizer steps (kernels/optimizer_kernels.h, Bf16OptimizerSlice): for Adam,
// AdamW and SGD, with fp32 and bf16 gradients, over 10 steps with a changing lr on odd lengths,
// - the fp32 master follows a double reference written here from docs/design.md's optimizer math,
// - the bf16 parameter written in the same pass is master_to_bf16(master), bitwise,
// - MasterWeights::Remainders gives bitwise the same parameters, and join(param, remainder) is
//   bitwise the fp32 master, at every step.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/bf16.h"
#include "base/errors.h"
#include "kernels/optimizer_kernels.h"
#include "kernel_test_util.h"

namespace {

using zl::Bf16;
using zl::DType;
using zl::MasterWeights;
using zl::test::check_close;
using zl::test::random_floats;

constexpr int kSteps = 10;
constexpr std::int64_t kLengths[] = {1, 7, 1031};

struct Rule {
  std::string name;
  zl::OptimizerKind kind;
  zl::AdamHyper adam;
  zl::SgdHyper sgd;
  float grad_scale;
};

std::vector<Rule> rules() {
  std::vector<Rule> out;
  zl::AdamHyper a;
  a.lr = 1e-2f;
  out.push_back({"adam", zl::OptimizerKind::Adam, a, {}, 0.5f});
  a.weight_decay = 0.05f;
  out.push_back({"adam+weight_decay", zl::OptimizerKind::Adam, a, {}, 1.0f});
  a.decoupled_weight_decay = true;
  a.weight_decay = 0.1f;
  out.push_back({"adamw", zl::OptimizerKind::AdamW, a, {}, 0.25f});
  zl::SgdHyper s;
  s.lr = 0.1f;
  out.push_back({"sgd", zl::OptimizerKind::Sgd, {}, s, 1.0f});
  s.momentum = 0.9f;
  s.weight_decay = 0.01f;
  out.push_back({"sgd momentum", zl::OptimizerKind::Sgd, {}, s, 0.5f});
  s.nesterov = true;
  out.push_back({"sgd nesterov", zl::OptimizerKind::Sgd, {}, s, 1.0f});
  return out;
}

// docs/design.md "Optimizer math", in double, on the fp32 master.
struct Reference {
  std::vector<double> p, m, v;
  void step(const Rule& r, const std::vector<float>& grad, double lr, std::int64_t t) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] * static_cast<double>(r.grad_scale);
      if (r.kind == zl::OptimizerKind::Sgd) {
        double d = g + r.sgd.weight_decay * p[i];
        if (r.sgd.momentum != 0.0f) {
          m[i] = t == 1 ? d : r.sgd.momentum * m[i] + (1.0 - r.sgd.dampening) * d;
          d = r.sgd.nesterov ? d + r.sgd.momentum * m[i] : m[i];
        }
        p[i] -= lr * d;
        continue;
      }
      const zl::AdamHyper& h = r.adam;
      if (h.decoupled_weight_decay) {
        p[i] *= 1.0 - lr * h.weight_decay;
      } else {
        g += h.weight_decay * p[i];
      }
      const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(t));
      const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(t));
      m[i] = h.beta1 * m[i] + (1.0 - h.beta1) * g;
      v[i] = h.beta2 * v[i] + (1.0 - h.beta2) * g * g;
      p[i] -= (lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + h.eps);
    }
  }
};

// One bf16 bucket slice's storage in one master layout.
struct Slice {
  std::vector<Bf16> param;
  std::vector<float> master;
  std::vector<std::int16_t> remainder;
  std::vector<float> m, v;
  Slice(const std::vector<float>& initial, MasterWeights layout) {
    const std::size_t n = initial.size();
    param.resize(n);
    m.assign(n, 0.0f);
    v.assign(n, 0.0f);
    if (layout == MasterWeights::Fp32) {
      master = initial;
      for (std::size_t i = 0; i < n; ++i) param[i] = zl::master_to_bf16(initial[i]);
    } else {
      remainder.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        const zl::SplitMaster split = zl::split_master(initial[i]);
        param[i] = split.hi;
        remainder[i] = split.lo;
      }
    }
  }
  zl::Bf16OptimizerSlice view(const void* grad, DType grad_dtype, MasterWeights layout) {
    zl::Bf16OptimizerSlice s;
    s.grad = grad;
    s.grad_dtype = grad_dtype;
    s.param = param.data();
    s.master_weights = layout;
    s.master = master.empty() ? nullptr : master.data();
    s.remainder = remainder.empty() ? nullptr : remainder.data();
    s.m = m.data();
    s.v = v.data();
    return s;
  }
};

float lr_at(float base, std::int64_t t) { return base * (1.0f - 0.05f * static_cast<float>(t)); }

void run_step(const Rule& r, Slice& slice, const void* grad, DType grad_dtype,
              MasterWeights layout, std::int64_t n, float lr, std::int64_t t,
              const zl::ExecContext& cpu = zl::ExecContext{}) {
  zl::Bf16OptimizerSlice view = slice.view(grad, grad_dtype, layout);
  if (r.kind == zl::OptimizerKind::Sgd) {
    if (r.sgd.momentum == 0.0f) view.m = nullptr;  // plain SGD must not need a buffer
    view.v = nullptr;
    zl::sgd_step_bf16(cpu, view, n, zl::make_sgd_step(r.sgd, lr, t, r.grad_scale));
  } else {
    zl::adam_step_bf16(cpu, view, n, zl::make_adam_step(r.adam, lr, t, r.grad_scale));
  }
}

// One step's random gradients, fp32 and rounded to bf16; data(dtype) is what the step reads.
struct StepGrads {
  std::vector<float> f32;
  std::vector<Bf16> bf16;
  StepGrads(std::int64_t n, std::mt19937& rng)
      : f32(random_floats(n, rng, -2.0f, 2.0f)), bf16(f32.size()) {
    for (std::size_t i = 0; i < f32.size(); ++i) bf16[i] = zl::float_to_bf16(f32[i]);
  }
  const void* data(DType dtype) const {
    return dtype == DType::F32 ? static_cast<const void*>(f32.data())
                               : static_cast<const void*>(bf16.data());
  }
};

float rule_lr(const Rule& r, std::int64_t t) {
  return lr_at(r.kind == zl::OptimizerKind::Sgd ? r.sgd.lr : r.adam.lr, t);
}

std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

}  // namespace

TEST_CASE("bf16 optimizer steps: fp32 master follows the reference, remainders are bitwise equal",
          "[kernels][optimizer][bf16]") {
  for (const Rule& r : rules()) {
    for (const DType grad_dtype : {DType::F32, DType::BF16}) {
      for (const std::int64_t n : kLengths) {
        const std::string label =
            r.name + " grads " + zl::dtype_name(grad_dtype) + " n=" + std::to_string(n);
        INFO(label);
        std::mt19937 rng(static_cast<unsigned>(n) * 7919u + 5u);
        const std::vector<float> initial = random_floats(n, rng);
        Slice fp32(initial, MasterWeights::Fp32);
        Slice rem(initial, MasterWeights::Remainders);
        Reference ref{std::vector<double>(initial.begin(), initial.end()),
                      std::vector<double>(initial.size(), 0.0),
                      std::vector<double>(initial.size(), 0.0)};
        for (std::int64_t t = 1; t <= kSteps; ++t) {
          std::vector<float> g = random_floats(n, rng, -2.0f, 2.0f);
          std::vector<Bf16> g16(g.size());
          if (grad_dtype == DType::BF16) {
            // The reference sees the gradient the kernel reads: rounded to bf16.
            for (std::size_t i = 0; i < g.size(); ++i) {
              g16[i] = zl::float_to_bf16(g[i]);
              g[i] = zl::bf16_to_float(g16[i]);
            }
          }
          const void* grad = grad_dtype == DType::F32 ? static_cast<const void*>(g.data())
                                                      : static_cast<const void*>(g16.data());
          const float lr = lr_at(r.kind == zl::OptimizerKind::Sgd ? r.sgd.lr : r.adam.lr, t);
          run_step(r, fp32, grad, grad_dtype, MasterWeights::Fp32, n, lr, t);
          run_step(r, rem, grad, grad_dtype, MasterWeights::Remainders, n, lr, t);
          ref.step(r, g, lr, t);
          for (std::int64_t i = 0; i < n; ++i) {
            const float joined = zl::join_master(rem.param[i], rem.remainder[i]);
            REQUIRE(bits(joined) == bits(fp32.master[i]));
            REQUIRE(rem.param[i].bits == fp32.param[i].bits);
            REQUIRE(fp32.param[i].bits == zl::master_to_bf16(fp32.master[i]).bits);
            REQUIRE(bits(rem.m[i]) == bits(fp32.m[i]));
          }
        }
        check_close(fp32.master, ref.p, 1e-6, 1e-5, label + " master");
        if (r.kind != zl::OptimizerKind::Sgd || r.sgd.momentum != 0.0f) {
          check_close(fp32.m, ref.m, 1e-6, 1e-5, label + " m / momentum");
        }
        if (r.kind != zl::OptimizerKind::Sgd) check_close(fp32.v, ref.v, 1e-6, 1e-5, label + " v");
        // The bf16 parameter is the master to within half a bf16 ulp (2^-9 relative).
        std::vector<float> param(fp32.param.size());
        for (std::size_t i = 0; i < param.size(); ++i) param[i] = zl::bf16_to_float(fp32.param[i]);
        check_close(param, ref.p, 1e-6, 1.0 / 256.0, label + " bf16 parameter");
      }
    }
  }
}

TEST_CASE("bf16 optimizer steps compute the element functions' bits (Note [ISA clones])",
          "[kernels][optimizer][bf16]") {
  // adam_step_bf16 / sgd_step_bf16 run the widest clone this CPU has; the element functions of
  // kernels/optim_math.h, one element at a time here, are the definition.
  const std::int64_t n = 4096 + 13;  // whole vectors of every width, and a tail
  for (const Rule& r : rules()) {
    for (const DType grad_dtype : {DType::F32, DType::BF16}) {
      for (const MasterWeights layout : {MasterWeights::Fp32, MasterWeights::Remainders}) {
        INFO(r.name << " grads " << zl::dtype_name(grad_dtype) << " remainders "
                    << (layout == MasterWeights::Remainders));
        std::mt19937 rng(31);
        const std::vector<float> initial = random_floats(n, rng);
        Slice stepped(initial, layout), element(initial, layout);
        for (std::int64_t t = 1; t <= 3; ++t) {
          const StepGrads grads(n, rng);
          const std::vector<float>& g = grads.f32;
          const std::vector<Bf16>& g16 = grads.bf16;
          const bool sgd = r.kind == zl::OptimizerKind::Sgd;
          const float lr = rule_lr(r, t);
          run_step(r, stepped, grads.data(grad_dtype), grad_dtype, layout, n, lr, t);
          const zl::AdamStep a = zl::make_adam_step(r.adam, lr, t, r.grad_scale);
          const zl::SgdStep s = zl::make_sgd_step(r.sgd, lr, t, r.grad_scale);
          for (std::size_t i = 0; i < g.size(); ++i) {
            Slice& e = element;
            const auto update = [&](auto gi) {
              if (layout == MasterWeights::Fp32) {
                if (sgd) {
                  zl::sgd_update_master(e.master[i], e.param[i], gi, e.m[i], s);
                } else {
                  zl::adam_update_master(e.master[i], e.param[i], gi, e.m[i], e.v[i], a);
                }
              } else if (sgd) {
                zl::sgd_update_remainder(e.param[i], e.remainder[i], gi, e.m[i], s);
              } else {
                zl::adam_update_remainder(e.param[i], e.remainder[i], gi, e.m[i], e.v[i], a);
              }
            };
            if (grad_dtype == DType::F32) {
              update(g[i]);
            } else {
              update(g16[i]);
            }
          }
        }
        const auto same = [](const auto& x, const auto& y) {
          return x.size() == y.size() &&
                 (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0);
        };
        CHECK(same(stepped.param, element.param));
        CHECK(same(stepped.master, element.master));
        CHECK(same(stepped.remainder, element.remainder));
        if (r.kind != zl::OptimizerKind::Sgd || r.sgd.momentum != 0.0f) {
          CHECK(same(stepped.m, element.m));
        }
        CHECK(same(stepped.v, element.v));
      }
    }
  }
}

TEST_CASE("bf16 optimizer steps split across CPU threads give the same bits",
          "[kernels][optimizer][bf16]") {
  const std::int64_t n = 3 * (std::int64_t{1} << 16) + 12345;  // 3 chunks, not a multiple of 16
  zl::ExecContext three{};
  three.cpu_threads = 3;
  for (const Rule& r : rules()) {
    for (const DType grad_dtype : {DType::F32, DType::BF16}) {
      for (const MasterWeights layout : {MasterWeights::Fp32, MasterWeights::Remainders}) {
        INFO(r.name << " grads " << zl::dtype_name(grad_dtype) << " remainders "
                    << (layout == MasterWeights::Remainders));
        std::mt19937 rng(7);
        const std::vector<float> initial = random_floats(n, rng);
        Slice one(initial, layout), split(initial, layout);
        for (std::int64_t t = 1; t <= 3; ++t) {
          const StepGrads grads(n, rng);
          const void* grad = grads.data(grad_dtype);
          const float lr = rule_lr(r, t);
          run_step(r, one, grad, grad_dtype, layout, n, lr, t);
          run_step(r, split, grad, grad_dtype, layout, n, lr, t, three);
        }
        const auto same = [](const auto& a, const auto& b) {
          // An unused buffer is empty (data() may be null, which memcmp must not get).
          return a.size() == b.size() &&
                 (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
        };
        CHECK(same(one.param, split.param));
        CHECK(same(one.master, split.master));
        CHECK(same(one.remainder, split.remainder));
        CHECK(same(one.m, split.m));
        CHECK(same(one.v, split.v));
      }
    }
  }
}

TEST_CASE("bf16 optimizer steps: bytes per element and missing buffers", "[kernels][optimizer][bf16]") {
  using zl::optimizer_step_bytes_per_element;
  constexpr auto kAdam = zl::OptimizerKind::Adam;
  constexpr auto kSgd = zl::OptimizerKind::Sgd;
  // fp32 Adam: p, g, m, v read; p, m, v written.
  CHECK(optimizer_step_bytes_per_element(kAdam, false, DType::F32, MasterWeights::Fp32,
                                         DType::F32) == 28);
  // bf16 Adam, fp32 master, bf16 grads: g 2 + master 4 + m 4 + v 4 read; master, m, v, param written.
  CHECK(optimizer_step_bytes_per_element(kAdam, false, DType::BF16, MasterWeights::Fp32,
                                         DType::BF16) == 28);
  CHECK(optimizer_step_bytes_per_element(kAdam, false, DType::BF16, MasterWeights::Fp32,
                                         DType::F32) == 30);
  // Remainders: param and remainder read and written instead of the master.
  CHECK(optimizer_step_bytes_per_element(kAdam, false, DType::BF16, MasterWeights::Remainders,
                                         DType::BF16) == 26);
  CHECK(optimizer_step_bytes_per_element(kSgd, false, DType::F32, MasterWeights::Fp32,
                                         DType::F32) == 12);
  CHECK(optimizer_step_bytes_per_element(kSgd, true, DType::BF16, MasterWeights::Fp32,
                                         DType::BF16) == 20);

  std::vector<Bf16> p(4), g(4);
  std::vector<float> m(4), v(4);
  zl::Bf16OptimizerSlice s;
  s.grad = g.data();
  s.grad_dtype = DType::BF16;
  s.param = p.data();
  s.m = m.data();
  s.v = v.data();
  // fp32 master layout without a master array: an internal error, not a silent skip.
  REQUIRE_THROWS_AS(zl::adam_step_bf16_cpu(s, 4, zl::make_adam_step({}, 1e-3f, 1, 1.0f)),
                    zl::InternalError);
  s.master_weights = MasterWeights::Remainders;
  REQUIRE_THROWS_AS(zl::adam_step_bf16_cpu(s, 4, zl::make_adam_step({}, 1e-3f, 1, 1.0f)),
                    zl::InternalError);
  zl::adam_step_bf16_cpu(zl::Bf16OptimizerSlice{}, 0, zl::make_adam_step({}, 1e-3f, 1, 1.0f));
}

TEST_CASE("bf16 optimizer steps: a NaN master gives a NaN bf16 parameter, never a zero",
          "[kernels][optimizer][bf16]") {
  // A GPU's arithmetic gives the one NaN 0x7FFFFFFF. Rounded to bf16 as Note [Remainders] rounds
  // (up, as its low half is >= 0x8000), its top half 0x7FFF wrapped to 0x8000: -0.0, a finite
  // parameter, so the per-window check missed a run gone to NaN. Each NaN here goes through the
  // CPU kernel (the same element functions as the CUDA kernel) in both master layouts.
  const auto is_nan = [](Bf16 b) { return (b.bits & 0x7F80u) == 0x7F80u && (b.bits & 0x7Fu) != 0; };
  const std::uint32_t nans[] = {0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FFF8000u, 0x7F808000u, 0x7FC00000u,
                                0xFFC00000u, 0x7F800001u};
  for (const Rule& r : rules()) {
    for (const std::uint32_t pattern : nans) {
      INFO(r.name << " master 0x" << std::hex << pattern);
      float nan;
      std::memcpy(&nan, &pattern, sizeof nan);
      const std::vector<float> initial(9, nan);  // an odd length: the vector body and its tail
      Slice fp32(initial, MasterWeights::Fp32);
      Slice rem(initial, MasterWeights::Remainders);
      const std::vector<float> g(initial.size(), 0.5f);
      run_step(r, fp32, g.data(), DType::F32, MasterWeights::Fp32, 9, rule_lr(r, 1), 1);
      run_step(r, rem, g.data(), DType::F32, MasterWeights::Remainders, 9, rule_lr(r, 1), 1);
      for (std::size_t i = 0; i < initial.size(); ++i) {
        REQUIRE(std::isnan(fp32.master[i]));
        REQUIRE(is_nan(fp32.param[i]));
        REQUIRE(rem.param[i].bits == fp32.param[i].bits);
        REQUIRE(bits(zl::join_master(rem.param[i], rem.remainder[i])) == bits(fp32.master[i]));
      }
    }
  }
}
