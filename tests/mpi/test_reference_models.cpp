// Each small reference config in configs/ trains briefly under mpirun and learns: its test loss
// falls well below the loss at initialisation (and accuracy rises well above chance).
#include <catch2/catch.hpp>

#include <string>

#include "mpi_test_util.h"

using namespace zl;
using namespace zl::test;

namespace {

struct Learned {
  EvalResult before, after;
};

Learned train_briefly(const std::string& config_name, std::int64_t steps) {
  const std::string path = std::string(ZEROLAP_SOURCE_DIR) + "/configs/" + config_name;
  // No checkpoints or outputs: this checks learning, not the run's files.
  const Config config = load_config(path, {"train.steps=" + std::to_string(steps),
                                           "checkpoint.dir=\"\"", "train.eval_every=0"});
  Trainer trainer(config, world_of(MPI_COMM_WORLD), quiet_options());
  Learned r;
  r.before = trainer.evaluate();
  for (std::int64_t s = 0; s < steps; ++s) trainer.train_step();
  r.after = trainer.evaluate();
  return r;
}

}  // namespace

TEST_CASE("the Fashion-MNIST MLP learns", "[reference]") {
  const Learned r = train_briefly("fashion_mnist_mlp.toml", 60);
  CHECK(r.after.loss < 0.5 * r.before.loss);
  CHECK(r.after.accuracy > 0.6);  // chance is 0.1
}

TEST_CASE("the Fashion-MNIST residual MLP learns", "[reference]") {
  const Learned r = train_briefly("fashion_mnist_residual.toml", 60);
  CHECK(r.after.loss < 0.5 * r.before.loss);
  CHECK(r.after.accuracy > 0.6);
}

TEST_CASE("the spirals MLP learns", "[reference]") {
  const Learned r = train_briefly("spirals.toml", 300);
  CHECK(r.after.accuracy > 0.9);  // chance is 1/3
}

TEST_CASE("the teacher regression MLP learns", "[reference]") {
  const Learned r = train_briefly("teacher_regression.toml", 300);
  CHECK(r.after.loss < 0.25 * r.before.loss);
}
