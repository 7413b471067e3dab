// Gradient checks of each layer type in models/layers.h (Linear with each fused activation,
// LayerNorm, residual add, the pre-LN residual block) against central differences of the double
// reference in reference_math.h. Each check also pins the layer's grad-ready contract: every
// parameter reported exactly once, in flat-layout order, and '=' ignores NaN garbage in the
// gradient destinations (gradients are overwritten, there is no zero_grad pass).
//
// Tolerances. The analytic values are float32 sums of <= ~20 products of O(1) numbers (batch 3,
// widths <= 5), so their rounding error is ~1e-7 (measured worst: ~1e-7 in forward and gradients);
// the reference's finite-difference error is ~1e-10 (see reference_math.h). Forward atol = rtol =
// 1e-6 and gradient atol 2e-6 / rtol 2e-5 leave >= 10x headroom over float rounding, while a real
// mistake (a missing term, a transposed weight, a wrong factor) is off by O(0.1).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "models/layers.h"
#include "tests/models/reference_math.h"

namespace zl::test {
namespace {

constexpr Tolerance kTolForward{1e-6, 1e-6};
constexpr Tolerance kTolGrad{2e-6, 2e-5};

void set_param(ParameterStore& store, int id, const std::vector<float>& values) {
  REQUIRE(static_cast<std::int64_t>(values.size()) == store.info(id).numel);
  copy_from_host(values.data(), store.param_data(id), store.device(), store.info(id).numel);
}

void randomize(ParameterStore& store, TestRng& rng) {
  for (int id = 0; id < store.count(); ++id) {
    set_param(store, id, rng.floats(store.info(id).numel, -1.0, 1.0));
  }
}

void fill_nan(float* dst, std::int64_t n) {
  std::vector<float> nan(static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN());
  copy_from_host(nan.data(), dst, DeviceKind::Cpu, n);
}

struct LayerCase {
  ParameterStore store;
  std::int64_t batch = 3;
  std::int64_t in = 0;
  std::int64_t out = 0;
  std::function<Value(Tape&, ParameterStore&, const Value&)> forward;
  std::function<Mat(const Params&, const Mat&)> reference;
  const std::vector<float>* skip_grad = nullptr;  // added to d(input) by the layer under test
};

// Runs forward + backward of c on a CPU tape with d(loss)/d(y) = a random probe, and checks
// y, every parameter gradient and d(input) against the double reference.
void gradcheck(LayerCase& c, std::uint64_t seed) {
  TestRng rng(seed);
  std::vector<float> xh = rng.floats(c.batch * c.in, -1.0, 1.0);
  Tape tape;
  Value x{Tensor{xh.data(), c.batch, c.in, DeviceKind::Cpu}, tape.alloc(c.batch, c.in)};
  Value y = c.forward(tape, c.store, x);
  REQUIRE(y.value.rows == c.batch);
  REQUIRE(y.value.cols == c.out);

  std::vector<float> probe = rng.floats(c.batch * c.out, -1.0, 1.0);
  copy_from_host(probe.data(), y.grad.f32(), DeviceKind::Cpu, y.grad.numel());
  for (int id = 0; id < c.store.count(); ++id)
    fill_nan(c.store.param_grad(id), c.store.info(id).numel);
  fill_nan(x.grad.f32(), x.grad.numel());

  std::vector<int> ready;
  const GradReadyHook hook = [&](int id) { ready.push_back(id); };
  tape.backward(BackwardContext{Accumulate::Overwrite, &hook});
  CHECK(ready == c.store.ids_in_layout_order());

  Params p = params_of(c.store);
  Mat xm(c.batch, c.in);
  for (std::size_t i = 0; i < xh.size(); ++i) xm.v[i] = xh[i];
  check_close(to_host(y.value), c.reference(p, xm), kTolForward, "forward");

  const auto loss = [&] { return probe_loss(c.reference(p, xm), probe); };
  for (int id = 0; id < c.store.count(); ++id) {
    std::vector<double> fd = central_differences(p[id], loss);
    check_close(to_host(c.store.param_grad(id), DeviceKind::Cpu, c.store.info(id).numel), fd,
                kTolGrad, "d " + c.store.info(id).name);
  }
  std::vector<double> fd_x = central_differences(xm.v, loss);
  if (c.skip_grad != nullptr) {
    for (std::size_t i = 0; i < fd_x.size(); ++i) fd_x[i] += (*c.skip_grad)[i];
  }
  check_close(to_host(x.grad), fd_x, kTolGrad, "d input");
}

const char* name_of(Activation act) {
  switch (act) {
    case Activation::Identity:
      return "identity";
    case Activation::Relu:
      return "relu";
    case Activation::Gelu:
      return "gelu";
    case Activation::Tanh:
      return "tanh";
  }
  return "?";
}

}  // namespace

TEST_CASE("linear layer with each fused activation matches finite differences", "[models]") {
  const Activation act =
      GENERATE(Activation::Identity, Activation::Relu, Activation::Gelu, Activation::Tanh);
  INFO("activation " << name_of(act));
  LayerCase c;
  c.in = 5;
  c.out = 4;
  const LinearLayer l = add_linear(c.store, "fc", c.in, c.out, act);
  c.store.finalize(DeviceKind::Cpu);
  TestRng rng(11);
  randomize(c.store, rng);
  c.forward = [&](Tape& tape, ParameterStore& store, const Value& x) {
    return linear_forward(tape, store, l, x, LayerCall{});
  };
  c.reference = [&](const Params& p, const Mat& x) {
    return ref_linear(x, p[l.weight], p[l.bias], l.out, act);
  };
  gradcheck(c, 12);
}

TEST_CASE("linear layer adds skip_grad to its input gradient", "[models]") {
  LayerCase c;
  c.in = 5;
  c.out = 3;
  const LinearLayer l = add_linear(c.store, "fc", c.in, c.out, Activation::Tanh);
  c.store.finalize(DeviceKind::Cpu);
  TestRng rng(21);
  randomize(c.store, rng);
  const std::vector<float> skip = rng.floats(c.batch * c.in, -1.0, 1.0);
  c.skip_grad = &skip;
  c.forward = [&](Tape& tape, ParameterStore& store, const Value& x) {
    LayerCall call;
    call.skip_grad = skip.data();
    return linear_forward(tape, store, l, x, call);
  };
  c.reference = [&](const Params& p, const Mat& x) {
    return ref_linear(x, p[l.weight], p[l.bias], l.out, Activation::Tanh);
  };
  gradcheck(c, 22);
}

TEST_CASE("layernorm matches finite differences", "[models]") {
  LayerCase c;
  c.in = 5;
  c.out = 5;
  const LayerNormLayer l = add_layernorm(c.store, "norm", c.in, 1e-5f);
  c.store.finalize(DeviceKind::Cpu);
  TestRng rng(31);
  set_param(c.store, l.weight, rng.floats(c.in, 0.5, 1.5));  // gamma away from the init 1
  set_param(c.store, l.bias, rng.floats(c.in, -0.5, 0.5));
  c.forward = [&](Tape& tape, ParameterStore& store, const Value& x) {
    return layernorm_forward(tape, store, l, x, LayerCall{});
  };
  c.reference = [&](const Params& p, const Mat& x) {
    return ref_layernorm(x, p[l.weight], p[l.bias], l.eps);
  };
  gradcheck(c, 32);
}

TEST_CASE("residual add sums the skip and branch gradients", "[models]") {
  // y = x + Linear(x), wired by hand as residual_block_forward does: the branch's output slot is
  // the add's output slot, and the branch's first layer adds it to d(x) (the skip path).
  LayerCase c;
  c.in = 4;
  c.out = 4;
  const LinearLayer l = add_linear(c.store, "fc", c.in, c.out, Activation::Relu);
  c.store.finalize(DeviceKind::Cpu);
  TestRng rng(41);
  randomize(c.store, rng);
  c.forward = [&](Tape& tape, ParameterStore& store, const Value& x) {
    Tensor dout = tape.alloc(x.value.rows, l.out);
    LayerCall call;
    call.layer = 0;
    call.out_grad = dout;
    call.skip_grad = dout.ptr;
    const Value branch = linear_forward(tape, store, l, x, call);
    return residual_add_forward(tape, x, branch, 1);
  };
  c.reference = [&](const Params& p, const Mat& x) {
    return ref_add(x, ref_linear(x, p[l.weight], p[l.bias], l.out, Activation::Relu));
  };
  gradcheck(c, 42);
}

TEST_CASE("pre-LN residual block matches finite differences", "[models]") {
  const Activation act = GENERATE(Activation::Relu, Activation::Gelu);
  INFO("activation " << name_of(act));
  LayerCase c;
  c.in = 4;
  c.out = 4;
  const ResidualBlock b = add_residual_block(c.store, "blocks.0", c.in, act, 1e-5f);
  c.store.finalize(DeviceKind::Cpu);
  TestRng rng(51);
  randomize(c.store, rng);
  set_param(c.store, b.norm.weight, rng.floats(c.in, 0.5, 1.5));
  c.forward = [&](Tape& tape, ParameterStore& store, const Value& x) {
    return residual_block_forward(tape, store, b, x, 0, nullptr);
  };
  c.reference = [&](const Params& p, const Mat& x) {
    const Mat n = ref_layernorm(x, p[b.norm.weight], p[b.norm.bias], b.norm.eps);
    const Mat h = ref_linear(n, p[b.fc1.weight], p[b.fc1.bias], c.in, act);
    return ref_add(x, ref_linear(h, p[b.fc2.weight], p[b.fc2.bias], c.in, Activation::Identity));
  };
  gradcheck(c, 52);
}

TEST_CASE("residual block records its four layers in order", "[models]") {
  ParameterStore store;
  const ResidualBlock b = add_residual_block(store, "blocks.0", 4, Activation::Relu, 1e-5f);
  store.finalize(DeviceKind::Cpu);
  std::vector<float> xh(8, 0.5f);
  Tape tape;
  std::vector<int> used;
  const ParamUseHook use = [&](int id) { used.push_back(id); };
  residual_block_forward(tape, store, b, Value{Tensor{xh.data(), 2, 4, DeviceKind::Cpu}, {}}, 7,
                         &use);
  CHECK(tape.size() == ResidualBlock::kLayers);
  CHECK(used == std::vector<int>{0, 1, 2, 3, 4, 5});
  std::vector<int> layers;
  std::vector<std::string> names;
  tape.on_backward_node = [&](const TapeNode& n, bool begin) {
    if (begin) {
      layers.push_back(n.layer);
      names.emplace_back(n.name);
    }
  };
  tape.backward(BackwardContext{});
  CHECK(layers == std::vector<int>{10, 9, 8, 7});
  CHECK(names == std::vector<std::string>{"residual_add", "linear", "linear", "layernorm"});
}

}  // namespace zl::test
