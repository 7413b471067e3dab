// A bf16 model (ModelSpec::dtype = BF16) against the fp32 model with the same weights: mlp and
// residual_mlp, relu/gelu/tanh. The fp32 model's parameters are set to the bf16 model's (widened
// exactly), so what differs is only the bf16 rounding of the input, of every activation and of
// every activation gradient; GEMMs, LayerNorm statistics, the loss and parameter gradients are
// fp32 in both. Also: the store's dtypes and layout, and the tape's bf16 allocations.
//
// Tolerance (normwise relative, ||got - ref|| / ||ref||): bf16's unit roundoff is u = 2^-8, and
// each rounding of a tensor adds a normwise relative error <= u (times the condition number of what
// follows, ~1 for these well-scaled layers). Forward, the deepest model here rounds 12 tensors on
// the way to the logits (input, each Linear's pre-activation and output, LayerNorm outputs,
// residual sums) and backward as many again, so first-order bounds are 12u for the output and
// loss and 24u for a parameter gradient; rounding errors are independent and partly cancel, which
// the bounds ignore. Output and loss: 12u = 0.047; gradients: 24u = 0.094 (measured: <= 0.009).
// ReLU is the exception for gradients: its derivative jumps at 0, so a unit whose pre-activation
// lies within rounding (~u) of 0 may switch on or off and change its whole contribution. About a
// fraction u of the units does, so the normwise error grows like sqrt(u) = 1/16 rather than u
// (measured up to 0.11 on these sizes); ReLU gradients get 3 sqrt(u) = 0.19.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/bf16.h"
#include "models/losses.h"
#include "models/model.h"

namespace zl {
namespace {

constexpr double kU = 1.0 / 256.0;
constexpr double kTolForward = 12 * kU;
constexpr double kTolGrad = 24 * kU;
constexpr double kTolGradRelu = 3.0 / 16.0;  // 3 sqrt(u)
constexpr std::int64_t kBatch = 32;

double rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
  REQUIRE(got.size() == ref.size());
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

std::vector<float> output_of(const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  if (t.dtype == DType::BF16) {
    for (std::int64_t i = 0; i < t.numel(); ++i) out[i] = bf16_to_float(t.bf16()[i]);
  } else {
    for (std::int64_t i = 0; i < t.numel(); ++i) out[i] = t.f32()[i];
  }
  return out;
}

struct Run {
  double loss;
  std::vector<float> output;
  std::vector<float> grads;  // the whole fp32 gradient buffer
};

Run forward_backward(Model& model, const std::vector<float>& x,
                     const std::vector<std::int32_t>& labels) {
  Tape tape;
  const Tensor input{const_cast<float*>(x.data()), kBatch, model.input_dim(), DeviceKind::Cpu};
  const ForwardResult r = model.forward(tape, input);
  CHECK(r.output.dtype == model.spec().dtype);
  CHECK(r.grad_output.dtype == model.spec().dtype);
  Run run;
  run.loss = cross_entropy_loss(tape.exec(), r.output, labels.data(), r.grad_output,
                                1.0f / kBatch, nullptr) / kBatch;
  run.output = output_of(r.output);
  tape.backward(BackwardContext{});
  const ParameterStore& s = model.store();
  run.grads.assign(s.grad(), s.grad() + s.total_numel());
  return run;
}

void compare(ModelKind kind, std::vector<std::int64_t> widths, Activation act) {
  ModelSpec spec;
  spec.kind = kind;
  spec.widths = std::move(widths);
  spec.activation = act;
  spec.seed = 21;
  ModelSpec spec16 = spec;
  spec16.dtype = DType::BF16;
  Model m32(spec, DeviceKind::Cpu);
  Model m16(spec16, DeviceKind::Cpu);
  ParameterStore& s16 = m16.store();
  ParameterStore& s32 = m32.store();
  REQUIRE(s16.param_dtype() == DType::BF16);
  REQUIRE(s16.total_numel() == s32.total_numel());
  // Same weights: the fp32 model takes the bf16 values, which are the fp32 init rounded.
  for (std::int64_t i = 0; i < s16.total_numel(); ++i) {
    const float init = s32.data()[i];
    const Bf16 w = s16.params_as<Bf16>()[i];
    REQUIRE(w.bits == master_to_bf16(init).bits);
    s32.data()[i] = bf16_to_float(w);
  }
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> x(static_cast<std::size_t>(kBatch * m32.input_dim()));
  for (float& v : x) v = dist(rng);
  std::vector<std::int32_t> labels(kBatch);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng() % m32.output_dim());

  const Run r32 = forward_backward(m32, x, labels);
  const Run r16 = forward_backward(m16, x, labels);
  CHECK(rel_error(r16.output, r32.output) <= kTolForward);
  CHECK(std::fabs(r16.loss - r32.loss) <= kTolForward * std::fabs(r32.loss));
  for (const ParameterInfo& p : s32.parameters()) {
    const auto begin = r32.grads.begin() + p.offset;
    const std::vector<float> g32(begin, begin + p.numel);
    const std::vector<float> g16(r16.grads.begin() + p.offset,
                                 r16.grads.begin() + p.offset + p.numel);
    INFO(p.name << ": relative error " << rel_error(g16, g32));
    CHECK(rel_error(g16, g32) <= (act == Activation::Relu ? kTolGradRelu : kTolGrad));
  }
}

}  // namespace

TEST_CASE("a bf16 mlp matches the fp32 mlp within bf16 rounding", "[models][bf16]") {
  const Activation act = GENERATE(Activation::Relu, Activation::Gelu, Activation::Tanh);
  INFO("activation " << static_cast<int>(act));
  compare(ModelKind::Mlp, {12, 32, 32, 10}, act);
}

TEST_CASE("a bf16 residual_mlp matches the fp32 residual_mlp within bf16 rounding",
          "[models][bf16]") {
  const Activation act = GENERATE(Activation::Relu, Activation::Gelu, Activation::Tanh);
  INFO("activation " << static_cast<int>(act));
  compare(ModelKind::ResidualMlp, {12, 32, 32, 32, 10}, act);
}

TEST_CASE("a bf16 store: bf16 parameters, fp32 gradients, the fp32 layout", "[models][bf16]") {
  ModelSpec spec;
  spec.kind = ModelKind::ResidualMlp;
  spec.widths = {5, 8, 8, 3};
  spec.dtype = DType::BF16;
  Model m16(spec, DeviceKind::Cpu);
  spec.dtype = DType::F32;
  Model m32(spec, DeviceKind::Cpu);
  const ParameterStore& s16 = m16.store();
  const ParameterStore& s32 = m32.store();
  CHECK(s16.param_dtype() == DType::BF16);
  CHECK(s32.param_dtype() == DType::F32);
  CHECK_THROWS_AS(s16.data(), InternalError);  // no fp32 view of bf16 parameters
  CHECK(s16.grad() != nullptr);                // gradients are fp32
  for (int id = 0; id < s16.count(); ++id) {
    CHECK(s16.info(id).offset == s32.info(id).offset);
    ParameterStore& mutable16 = m16.store();
    const Tensor p = mutable16.param_tensor(id);
    const Tensor g = mutable16.grad_tensor(id);
    CHECK(p.dtype == DType::BF16);
    CHECK(g.dtype == DType::F32);
    CHECK(static_cast<char*>(p.ptr) - static_cast<char*>(s16.raw_data()) ==
          2 * s16.info(id).offset);
    CHECK(p.bf16() == s16.param_as<Bf16>(id));
    CHECK_THROWS_AS(p.f32(), InternalError);
  }
  // The fp32 initial values are the ones the fp32 model starts from.
  const std::vector<float> init = m16.initial_parameters();
  for (std::int64_t i = 0; i < s32.total_numel(); ++i) REQUIRE(init[i] == s32.data()[i]);
}

TEST_CASE("tape: bf16 tensors are 64-byte aligned and disjoint, by bytes", "[models][bf16]") {
  Tape tape;
  const Tensor a = tape.alloc(3, 5, DType::BF16);
  const Tensor b = tape.alloc(1, 1, DType::BF16);
  const Tensor c = tape.alloc(2, 7);
  for (const Tensor* t : {&a, &b, &c}) {
    CHECK(reinterpret_cast<std::uintptr_t>(t->ptr) % 64 == 0);
  }
  CHECK(a.dtype == DType::BF16);
  CHECK(a.bytes() == 30);
  CHECK(static_cast<char*>(b.ptr) - static_cast<char*>(a.ptr) == 64);  // 30 bytes round to 64
  CHECK(static_cast<char*>(c.ptr) - static_cast<char*>(b.ptr) == 64);
  const Tensor rows = a.row_slice(1, 2);
  CHECK(static_cast<char*>(rows.ptr) - static_cast<char*>(a.ptr) == 10);
  CHECK(rows.dtype == DType::BF16);
}

}  // namespace zl
