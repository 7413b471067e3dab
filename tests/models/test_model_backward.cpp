// Whole-model forward/backward: gradient checks of mlp (each activation) and residual_mlp against
// a double reference built from the parameter *names* (so naming is checked too), the forward's
// before_use hook, Note [Grad-ready hook] (once per parameter, in layout order, only after the
// owning node is done), and Accumulate (= ignores old contents, += adds).
// Tolerances: as test_layers_gradcheck.cpp; widths <= 5 and depth <= 4 keep float32 rounding
// ~1e-7, and atol 3e-6 / rtol 3e-5 leave >= 10x headroom.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/errors.h"
#include "models/model.h"
#include "tests/models/reference_math.h"

namespace zl::test {
namespace {

constexpr Tolerance kTolForward{1e-6, 1e-6};
constexpr Tolerance kTolGrad{3e-6, 3e-5};
constexpr std::int64_t kBatch = 3;

ModelSpec make_spec(ModelKind kind, std::vector<std::int64_t> widths, Activation act) {
  ModelSpec s;
  s.kind = kind;
  s.widths = std::move(widths);
  s.activation = act;
  s.seed = 9;
  return s;
}

// The model's function in double, looking parameters up by name.
Mat ref_forward(const Model& m, const Params& p, const Mat& x) {
  const ModelSpec& spec = m.spec();
  const ParameterStore& s = m.store();
  const auto P = [&](const std::string& name) -> const std::vector<double>& {
    const int id = s.find(name);
    REQUIRE(id >= 0);
    return p[static_cast<std::size_t>(id)];
  };
  const std::vector<std::int64_t>& w = spec.widths;
  const std::size_t n = w.size();
  if (spec.kind == ModelKind::Mlp) {
    Mat h = x;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      const std::string l = "layers." + std::to_string(i);
      h = ref_linear(h, P(l + ".weight"), P(l + ".bias"), w[i + 1],
                     i + 2 < n ? spec.activation : Activation::Identity);
    }
    return h;
  }
  Mat h = ref_linear(x, P("input.weight"), P("input.bias"), w[1], Activation::Identity);
  for (std::size_t i = 0; i + 3 < n; ++i) {
    const std::string b = "blocks." + std::to_string(i);
    Mat t = ref_layernorm(h, P(b + ".norm.weight"), P(b + ".norm.bias"), spec.layernorm_eps);
    t = ref_linear(t, P(b + ".fc1.weight"), P(b + ".fc1.bias"), w[1], spec.activation);
    t = ref_linear(t, P(b + ".fc2.weight"), P(b + ".fc2.bias"), w[1], Activation::Identity);
    h = ref_add(h, t);
  }
  h = ref_layernorm(h, P("norm.weight"), P("norm.bias"), spec.layernorm_eps);
  return ref_linear(h, P("output.weight"), P("output.bias"), w[n - 1], Activation::Identity);
}

// A model whose parameters are all perturbed away from the init (so LayerNorm's gamma != 1 and
// beta != 0 take part in the check), an input batch and a probe for d(loss)/d(output).
struct Fixture {
  Model model;
  std::vector<float> x;
  std::vector<float> probe;
  Fixture(const ModelSpec& spec, std::uint64_t seed) : model(spec, DeviceKind::Cpu) {
    TestRng rng(seed);
    ParameterStore& s = model.store();
    for (int id = 0; id < s.count(); ++id) {
      float* v = s.param_data(id);
      for (std::int64_t i = 0; i < s.info(id).numel; ++i) {
        v[i] += static_cast<float>(rng.uniform(-0.3, 0.3));
      }
    }
    x = rng.floats(kBatch * model.input_dim(), -1.0, 1.0);
    probe = rng.floats(kBatch * model.output_dim(), -1.0, 1.0);
  }
  Tensor input() { return Tensor{x.data(), kBatch, model.input_dim(), DeviceKind::Cpu}; }
  // forward, write the probe into grad_output; the tape holds the nodes for backward.
  ForwardResult forward(Tape& tape, const ParamUseHook& use = {}) {
    tape.reset();
    ForwardResult r = model.forward(tape, input(), use);
    REQUIRE(r.output.rows == kBatch);
    REQUIRE(r.output.cols == model.output_dim());
    copy_from_host(probe.data(), r.grad_output.f32(), DeviceKind::Cpu, r.grad_output.numel());
    return r;
  }
  std::vector<float> grads() {
    const ParameterStore& s = model.store();
    return std::vector<float>(s.grad(), s.grad() + s.total_numel());
  }
};

void gradcheck_model(const ModelSpec& spec) {
  Fixture f(spec, 77);
  Tape tape;
  const ForwardResult r = f.forward(tape);
  tape.backward(BackwardContext{});

  Params p = params_of(f.model.store());
  Mat xm(kBatch, f.model.input_dim());
  for (std::size_t i = 0; i < f.x.size(); ++i) xm.v[i] = f.x[i];
  check_close(to_host(r.output), ref_forward(f.model, p, xm), kTolForward, "forward");

  const auto loss = [&] { return probe_loss(ref_forward(f.model, p, xm), f.probe); };
  const ParameterStore& s = f.model.store();
  for (int id = 0; id < s.count(); ++id) {
    const std::vector<double> fd = central_differences(p[static_cast<std::size_t>(id)], loss);
    check_close(to_host(s.param_grad(id), DeviceKind::Cpu, s.info(id).numel), fd, kTolGrad,
                "d " + s.info(id).name);
  }
  // Gradients never spill into the alignment padding.
  std::vector<bool> is_param(static_cast<std::size_t>(s.total_numel()), false);
  for (const ParameterInfo& info : s.parameters()) {
    for (std::int64_t i = 0; i < info.numel; ++i)
      is_param[static_cast<std::size_t>(info.offset + i)] = true;
  }
  for (std::int64_t i = 0; i < s.total_numel(); ++i) {
    if (!is_param[static_cast<std::size_t>(i)]) CHECK(s.grad()[i] == 0.0f);
  }
}

}  // namespace

TEST_CASE("mlp gradients match finite differences for each activation", "[models]") {
  const Activation act =
      GENERATE(Activation::Identity, Activation::Relu, Activation::Gelu, Activation::Tanh);
  INFO("activation " << static_cast<int>(act));
  gradcheck_model(make_spec(ModelKind::Mlp, {5, 4, 4, 3}, act));
}

TEST_CASE("residual_mlp gradients match finite differences", "[models]") {
  const Activation act = GENERATE(Activation::Relu, Activation::Gelu, Activation::Tanh);
  INFO("activation " << static_cast<int>(act));
  gradcheck_model(make_spec(ModelKind::ResidualMlp, {5, 4, 4, 4, 3}, act));
}

TEST_CASE("forward calls before_use for each parameter before reading it", "[models]") {
  const ModelKind kind = GENERATE(ModelKind::Mlp, ModelKind::ResidualMlp);
  Fixture f(make_spec(kind, {5, 4, 4, 4, 3}, Activation::Gelu), 5);
  ParameterStore& s = f.model.store();
  Tape tape;
  const std::vector<float> clean = to_host(f.forward(tape).output);

  // Every parameter is NaN until its before_use call "lands" it, as a broadcast would: any read
  // ahead of the hook shows up as NaN in the output.
  const std::vector<float> values(s.data(), s.data() + s.total_numel());
  std::fill(s.data(), s.data() + s.total_numel(), std::numeric_limits<float>::quiet_NaN());
  std::vector<int> used;
  const ParamUseHook land = [&](int id) {
    used.push_back(id);
    const ParameterInfo& p = s.info(id);
    std::memcpy(s.param_data(id), values.data() + p.offset, sizeof(float) * p.numel);
  };
  const std::vector<float> landed = to_host(f.forward(tape, land).output);
  CHECK(std::memcmp(clean.data(), landed.data(), sizeof(float) * clean.size()) == 0);
  std::vector<int> registration_order(static_cast<std::size_t>(s.count()));
  for (int id = 0; id < s.count(); ++id) registration_order[static_cast<std::size_t>(id)] = id;
  CHECK(used == registration_order);
}

TEST_CASE("the parameters backward reads are those marked read_in_backward", "[models]") {
  // ZeRO stage 3 plans backward's gathers from ParameterInfo::read_in_backward: it must be what
  // the backward closures read (before_read), for both model kinds.
  const ModelKind kind = GENERATE(ModelKind::Mlp, ModelKind::ResidualMlp);
  Fixture f(make_spec(kind, {5, 4, 4, 4, 3}, Activation::Tanh), 7);
  const ParameterStore& s = f.model.store();
  Tape tape;
  f.forward(tape);
  std::vector<char> read(static_cast<std::size_t>(s.count()), 0);
  const ParamUseHook before_read = [&](int id) { read[static_cast<std::size_t>(id)] = 1; };
  BackwardContext ctx;
  ctx.before_read = &before_read;
  tape.backward(ctx);
  int unread = 0;
  for (int id = 0; id < s.count(); ++id) {
    INFO(s.info(id).name);
    CHECK(static_cast<bool>(read[static_cast<std::size_t>(id)]) == s.info(id).read_in_backward);
    unread += !s.info(id).read_in_backward;
  }
  CHECK(!s.info(0).read_in_backward);  // the first layer's weight: no d(input) is computed
  CHECK(unread > 1);                   // and the biases
}

TEST_CASE("grad-ready hook: once per parameter, in layout order, after its node", "[models]") {
  const ModelKind kind = GENERATE(ModelKind::Mlp, ModelKind::ResidualMlp);
  Fixture f(make_spec(kind, {5, 4, 4, 4, 3}, Activation::Tanh), 6);
  ParameterStore& s = f.model.store();
  Tape tape;
  f.forward(tape);
  tape.backward(BackwardContext{});
  const std::vector<float> clean = f.grads();

  // The hook poisons the parameter it reports, as an interleaved optimizer step may overwrite it
  // right away: a node that read its parameter after reporting it (or a later node that read it)
  // would turn some gradient into NaN or change it.
  f.forward(tape);
  std::vector<int> ready;
  std::vector<int> ready_layers;
  int current_layer = -1;
  tape.on_backward_node = [&](const TapeNode& n, bool begin) {
    current_layer = begin ? n.layer : -1;
  };
  const GradReadyHook poison = [&](int id) {
    ready.push_back(id);
    ready_layers.push_back(current_layer);
    std::fill(s.param_data(id), s.param_data(id) + s.info(id).numel,
              std::numeric_limits<float>::quiet_NaN());
  };
  tape.backward(BackwardContext{Accumulate::Overwrite, &poison});

  CHECK(ready == s.ids_in_layout_order());  // each once, gradients ready in flat-layout order
  std::vector<int> layers_seen;
  for (std::size_t i = 0; i < ready_layers.size(); ++i) {
    CHECK(ready_layers[i] >= 0);  // reported from inside a node's backward
    if (i > 0) CHECK(ready_layers[i] <= ready_layers[i - 1]);  // reverse layer order
  }
  const std::vector<float> poisoned = f.grads();
  CHECK(std::memcmp(clean.data(), poisoned.data(), sizeof(float) * clean.size()) == 0);
}

TEST_CASE("Accumulate: '=' ignores old gradients, '+=' adds exactly", "[models]") {
  const ModelKind kind = GENERATE(ModelKind::Mlp, ModelKind::ResidualMlp);
  Fixture f(make_spec(kind, {5, 4, 4, 4, 3}, Activation::Relu), 7);
  ParameterStore& s = f.model.store();
  Tape tape;
  f.forward(tape);
  for (const ParameterInfo& p : s.parameters()) {
    std::fill(s.grad() + p.offset, s.grad() + p.offset + p.numel,
              std::numeric_limits<float>::quiet_NaN());
  }
  tape.backward(BackwardContext{Accumulate::Overwrite});
  const std::vector<float> once = f.grads();
  for (float g : once) REQUIRE(std::isfinite(g));

  // The same backward again (nodes never write what they read, so the tape can replay).
  tape.backward(BackwardContext{Accumulate::Add});
  const std::vector<float> twice = f.grads();
  for (const ParameterInfo& p : s.parameters()) {
    INFO(p.name);
    for (std::int64_t i = p.offset; i < p.offset + p.numel; ++i) {
      const auto k = static_cast<std::size_t>(i);
      if (p.shape.size() == 2) {
        // Linear weights: GEMM with beta = 1 adds the finished product: g + g, exactly.
        CHECK(twice[k] == 2.0f * once[k]);
      } else {
        // bias_backward / layernorm_backward (CPU) add each row into the destination in turn,
        // so '+=' rounds as ((g + r1) + r2) + r3 rather than g + (r1 + r2 + r3): equal to float
        // rounding only. Bitwise once those kernels sum first and add once.
        CHECK(twice[k] == Approx(2.0f * once[k]).epsilon(1e-6).margin(1e-7));
      }
    }
  }
}

TEST_CASE("micro-batches accumulated with '+=' equal the whole batch", "[models]") {
  // grad_accum: micro-batch A with '=', then B with '+='; the probe loss is a sum over rows, so the
  // sum of the two gradients equals the gradient of the concatenated batch.
  Fixture f(make_spec(ModelKind::ResidualMlp, {5, 4, 4, 3}, Activation::Gelu), 8);
  const std::int64_t in = f.model.input_dim(), out = f.model.output_dim();
  Tape tape;
  f.forward(tape);
  tape.backward(BackwardContext{});
  const std::vector<float> whole = f.grads();

  for (std::int64_t begin : {std::int64_t{0}, std::int64_t{2}}) {
    const std::int64_t rows = begin == 0 ? 2 : kBatch - 2;
    tape.reset();
    const Tensor x{f.x.data() + begin * in, rows, in, DeviceKind::Cpu};
    const ForwardResult r = f.model.forward(tape, x);
    copy_from_host(f.probe.data() + begin * out, r.grad_output.f32(), DeviceKind::Cpu, rows * out);
    tape.backward(BackwardContext{begin == 0 ? Accumulate::Overwrite : Accumulate::Add});
  }
  const std::vector<float> accumulated = f.grads();
  for (std::size_t i = 0; i < whole.size(); ++i) {
    INFO("element " << i);
    CHECK(accumulated[i] == Approx(whole[i]).epsilon(1e-5).margin(1e-6));
  }
}

TEST_CASE("model forward records num_layers nodes and reuses the arena", "[models]") {
  const ModelKind kind = GENERATE(ModelKind::Mlp, ModelKind::ResidualMlp);
  Fixture f(make_spec(kind, {5, 4, 4, 4, 3}, Activation::Relu), 9);
  Tape tape;
  const ForwardResult first = f.forward(tape);
  CHECK(static_cast<int>(tape.size()) == f.model.num_layers());
  std::vector<int> layers;
  tape.on_backward_node = [&](const TapeNode& n, bool begin) {
    if (begin) layers.push_back(n.layer);
  };
  tape.backward(BackwardContext{});
  std::vector<int> expected;
  for (int l = f.model.num_layers() - 1; l >= 0; --l) expected.push_back(l);
  CHECK(layers == expected);

  const ForwardResult second = f.forward(tape);  // same batch size: same arena addresses
  CHECK(second.output.ptr == first.output.ptr);
  CHECK(second.grad_output.ptr == first.grad_output.ptr);
}

TEST_CASE("model forward rejects an input of the wrong width", "[models]") {
  Model m(make_spec(ModelKind::Mlp, {5, 3}, Activation::Relu), DeviceKind::Cpu);
  std::vector<float> x(12);
  Tape tape;
  CHECK_THROWS_AS(m.forward(tape, Tensor{x.data(), 3, 4, DeviceKind::Cpu}), UserError);
}

}  // namespace zl::test
