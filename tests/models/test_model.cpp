// Model construction: spec validation, PyTorch-style parameter names and shapes, the flat layout
// of a real model, deterministic torch-like initialisation and its statistics.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/errors.h"
#include "models/model.h"
#include "tests/models/reference_math.h"

namespace zl::test {
namespace {

ModelSpec make_spec(ModelKind kind, std::vector<std::int64_t> widths, std::uint64_t seed = 0) {
  ModelSpec s;
  s.kind = kind;
  s.widths = std::move(widths);
  s.seed = seed;
  return s;
}

std::vector<std::string> names_of(const Model& m) {
  std::vector<std::string> names;
  for (const ParameterInfo& p : m.store().parameters()) names.push_back(p.name);
  return names;
}

bool same_bits(const Model& a, const Model& b) {
  const ParameterStore& x = a.store();
  const ParameterStore& y = b.store();
  if (x.total_numel() != y.total_numel()) return false;
  return std::memcmp(x.data(), y.data(), sizeof(float) * x.total_numel()) == 0;
}

}  // namespace

TEST_CASE("validate_model_spec rejects bad widths with UserError", "[models]") {
  CHECK_NOTHROW(validate_model_spec(make_spec(ModelKind::Mlp, {3, 2})));
  CHECK_NOTHROW(validate_model_spec(make_spec(ModelKind::ResidualMlp, {3, 8, 2})));
  CHECK_NOTHROW(validate_model_spec(make_spec(ModelKind::ResidualMlp, {3, 8, 8, 8, 2})));

  CHECK_THROWS_AS(validate_model_spec(make_spec(ModelKind::Mlp, {})), UserError);
  CHECK_THROWS_AS(validate_model_spec(make_spec(ModelKind::Mlp, {5})), UserError);
  CHECK_THROWS_AS(validate_model_spec(make_spec(ModelKind::ResidualMlp, {5, 3})), UserError);
  CHECK_THROWS_WITH(validate_model_spec(make_spec(ModelKind::Mlp, {5, 0, 3})),
                    Catch::Contains("widths[1]"));
  CHECK_THROWS_AS(validate_model_spec(make_spec(ModelKind::Mlp, {5, 4, -3})), UserError);
  CHECK_THROWS_WITH(validate_model_spec(make_spec(ModelKind::ResidualMlp, {5, 8, 8, 6, 2})),
                    Catch::Contains("widths[3]") && Catch::Contains("equal"));
  ModelSpec bad_eps = make_spec(ModelKind::ResidualMlp, {3, 8, 2});
  bad_eps.layernorm_eps = 0.0f;
  CHECK_THROWS_AS(validate_model_spec(bad_eps), UserError);

  CHECK_THROWS_AS(Model(make_spec(ModelKind::Mlp, {5}), DeviceKind::Cpu), UserError);
}

TEST_CASE("mlp parameters: names, torch shapes, layers", "[models]") {
  const Model m(make_spec(ModelKind::Mlp, {5, 4, 3}), DeviceKind::Cpu);
  CHECK(names_of(m) == std::vector<std::string>{"layers.0.weight", "layers.0.bias",
                                                "layers.1.weight", "layers.1.bias"});
  CHECK(m.store().info(0).shape == std::vector<std::int64_t>{4, 5});  // (out, in)
  CHECK(m.store().info(1).shape == std::vector<std::int64_t>{4});
  CHECK(m.store().info(2).shape == std::vector<std::int64_t>{3, 4});
  CHECK(m.num_layers() == 2);
  CHECK(m.input_dim() == 5);
  CHECK(m.output_dim() == 3);
  CHECK(m.store().finalized());
}

TEST_CASE("residual_mlp parameters: names, torch shapes, layers", "[models]") {
  const Model m(make_spec(ModelKind::ResidualMlp, {5, 4, 4, 4, 3}), DeviceKind::Cpu);
  CHECK(names_of(m) ==
        std::vector<std::string>{"input.weight", "input.bias", "blocks.0.norm.weight",
                                 "blocks.0.norm.bias", "blocks.0.fc1.weight", "blocks.0.fc1.bias",
                                 "blocks.0.fc2.weight", "blocks.0.fc2.bias", "blocks.1.norm.weight",
                                 "blocks.1.norm.bias", "blocks.1.fc1.weight", "blocks.1.fc1.bias",
                                 "blocks.1.fc2.weight", "blocks.1.fc2.bias", "norm.weight",
                                 "norm.bias", "output.weight", "output.bias"});
  const ParameterStore& s = m.store();
  CHECK(s.info(s.find("input.weight")).shape == std::vector<std::int64_t>{4, 5});
  CHECK(s.info(s.find("blocks.1.fc2.weight")).shape == std::vector<std::int64_t>{4, 4});
  CHECK(s.info(s.find("norm.weight")).shape == std::vector<std::int64_t>{4});
  CHECK(s.info(s.find("output.weight")).shape == std::vector<std::int64_t>{3, 4});
  CHECK(m.num_layers() == 1 + 2 * 4 + 2);

  const Model no_blocks(make_spec(ModelKind::ResidualMlp, {5, 4, 3}), DeviceKind::Cpu);
  CHECK(no_blocks.num_layers() == 3);
  CHECK(no_blocks.store().count() == 6);
}

TEST_CASE("model flat layout: reverse order, aligned, zero padding", "[models]") {
  const Model m(make_spec(ModelKind::ResidualMlp, {5, 4, 4, 3}, 3), DeviceKind::Cpu);
  const ParameterStore& s = m.store();
  std::vector<bool> is_param(static_cast<std::size_t>(s.total_numel()), false);
  std::int64_t prev_offset = s.total_numel();
  for (int id = 0; id < s.count(); ++id) {
    const ParameterInfo& p = s.info(id);
    CHECK(p.offset % ParameterStore::kAlignFloats == 0);
    CHECK(p.offset < prev_offset);  // registration order = decreasing offsets
    prev_offset = p.offset;
    for (std::int64_t i = 0; i < p.numel; ++i) {
      CHECK_FALSE(is_param[static_cast<std::size_t>(p.offset + i)]);
      is_param[static_cast<std::size_t>(p.offset + i)] = true;
    }
  }
  CHECK(s.info(s.count() - 1).offset == 0);
  for (std::int64_t i = 0; i < s.total_numel(); ++i) {
    if (!is_param[static_cast<std::size_t>(i)]) CHECK(s.data()[i] == 0.0f);
  }
}

TEST_CASE("initialisation is deterministic in the seed", "[models]") {
  const ModelKind kind = GENERATE(ModelKind::Mlp, ModelKind::ResidualMlp);
  const std::vector<std::int64_t> widths{7, 6, 6, 6, 2};
  const Model a(make_spec(kind, widths, 1), DeviceKind::Cpu);
  const Model b(make_spec(kind, widths, 1), DeviceKind::Cpu);
  const Model c(make_spec(kind, widths, 2), DeviceKind::Cpu);
  CHECK(same_bits(a, b));
  // Every Linear parameter differs between seeds (LayerNorm's 1/0 init does not depend on it).
  for (int id = 0; id < a.store().count(); ++id) {
    const std::string& name = a.store().info(id).name;
    if (name.find("norm") != std::string::npos) continue;
    INFO(name);
    CHECK(std::memcmp(a.store().param_data(id), c.store().param_data(id),
                      sizeof(float) * a.store().info(id).numel) != 0);
  }

  // initialize_parameters() restores the seed's values, padding included.
  Model d(make_spec(kind, widths, 1), DeviceKind::Cpu);
  for (std::int64_t i = 0; i < d.store().total_numel(); ++i) d.store().data()[i] = 7.0f;
  d.initialize_parameters();
  CHECK(same_bits(a, d));
}

// A rank that keeps part of the model (stage 3's shards, bf16 masters) draws that part alone: the
// same values, bit for bit, as the whole layout has there, inside a parameter, across parameters
// and padding, and for windows that start mid-way through a parameter's random stream.
TEST_CASE("initial values of a window of the layout equal the whole layout's there", "[models]") {
  const ModelKind kind = GENERATE(ModelKind::Mlp, ModelKind::ResidualMlp);
  const Model m(make_spec(kind, {7, 6, 6, 6, 2}, 3), DeviceKind::Cpu);
  const std::vector<float> whole = m.initial_parameters();
  const auto total = static_cast<std::int64_t>(whole.size());
  REQUIRE(total == m.store().total_numel());
  for (std::int64_t offset = 0; offset < total; offset += 5) {
    for (const std::int64_t numel : {std::int64_t{0}, std::int64_t{1}, std::int64_t{13},
                                     total - offset}) {
      if (offset + numel > total) continue;
      INFO("offset " << offset << ", numel " << numel);
      const std::vector<float> window = m.initial_parameters(offset, numel);
      REQUIRE(static_cast<std::int64_t>(window.size()) == numel);
      CHECK((numel == 0 ||  // an empty window has no data() to compare
             std::memcmp(window.data(), whole.data() + offset, sizeof(float) * numel) == 0));
    }
  }
  CHECK_THROWS_AS(m.initial_parameters(total - 1, 2), zl::InternalError);
}

TEST_CASE("initialisation statistics follow torch.nn.Linear and LayerNorm", "[models]") {
  const Model m(make_spec(ModelKind::ResidualMlp, {256, 128, 128, 10}, 5), DeviceKind::Cpu);
  const ParameterStore& s = m.store();
  for (int id = 0; id < s.count(); ++id) {
    const ParameterInfo& p = s.info(id);
    INFO(p.name);
    const float* v = s.param_data(id);
    if (p.name.find("norm.weight") != std::string::npos) {
      for (std::int64_t i = 0; i < p.numel; ++i) CHECK(v[i] == 1.0f);
      continue;
    }
    if (p.name.find("norm.bias") != std::string::npos) {
      for (std::int64_t i = 0; i < p.numel; ++i) CHECK(v[i] == 0.0f);
      continue;
    }
    // Linear: fan_in is the weight's second dimension (the bias uses its layer's fan_in).
    const int weight_id = s.find(p.name.substr(0, p.name.rfind('.')) + ".weight");
    const std::int64_t fan_in = s.info(weight_id).shape[1];
    const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
    double sum = 0.0, sum_sq = 0.0, max_abs = 0.0;
    for (std::int64_t i = 0; i < p.numel; ++i) {
      REQUIRE(std::abs(v[i]) <= bound);
      sum += v[i];
      sum_sq += static_cast<double>(v[i]) * v[i];
      max_abs = std::max(max_abs, static_cast<double>(std::abs(v[i])));
    }
    if (p.numel >= 1000) {
      // U(-b, b): mean 0 (std of the sample mean b / sqrt(3 n) < 0.02 b for n >= 1000),
      // variance b^2 / 3 (relative std of the sample variance ~ 0.9 / sqrt(n) < 3%).
      const double n = static_cast<double>(p.numel);
      CHECK(std::abs(sum / n) < 0.06 * bound);
      CHECK(sum_sq / n == Approx(bound * bound / 3.0).epsilon(0.1));
      CHECK(max_abs > 0.99 * bound);
    }
  }
}

}  // namespace zl::test
