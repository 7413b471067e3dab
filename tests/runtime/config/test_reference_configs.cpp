// The reference configs added with checkpoints parse, build their models, and the benchmark MLP has
// at least 50M parameters (counted from its widths, without allocating it).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "models/model.h"
#include "runtime/config/config.h"

using zl::Config;

TEST_CASE("reference configs: residual Fashion-MNIST, teacher regression, large MLP",
          "[checkpoint][config]") {
  const std::string root = ZEROLAP_SOURCE_DIR;
  const Config residual = zl::load_config(root + "/configs/fashion_mnist_residual.toml");
  CHECK(residual.model.kind == zl::ModelKind::ResidualMlp);
  CHECK(residual.checkpoint.every > 0);
  CHECK(zl::Model(residual.model, zl::DeviceKind::Cpu).store().parameter_numel() == 468234);

  const Config teacher = zl::load_config(root + "/configs/teacher_regression.toml");
  CHECK(teacher.data.kind == zl::DataKind::Teacher);
  CHECK(teacher.data.teacher_task == zl::TaskKind::Regression);
  CHECK_NOTHROW(zl::Model(teacher.model, zl::DeviceKind::Cpu));

  const Config large = zl::load_config(root + "/configs/large_mlp.toml");
  REQUIRE(large.model.kind == zl::ModelKind::Mlp);
  std::int64_t params = 0;
  for (std::size_t i = 0; i + 1 < large.model.widths.size(); ++i) {
    params += large.model.widths[i] * large.model.widths[i + 1] + large.model.widths[i + 1];
  }
  CHECK(params >= 50'000'000);
  CHECK(params == 50'384'906);
}
