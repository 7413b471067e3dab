// Each small reference config in configs/ trains briefly under mpirun and learns: its test loss
// falls well below the loss at initialisation (and accuracy rises well above chance). In bf16,
// the Fashion-MNIST MLP reaches the accuracy of the reference models (docs/guide.md) and the
// teacher task fp32's loss.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "mpi_test_util.h"

using namespace zl;
using namespace zl::test;

namespace {

struct Learned {
  EvalResult before, after;
};

// steps = 0: the config's own length (train.epochs).
Learned train_briefly(const std::string& config_name, std::int64_t steps,
                      std::vector<std::string> overrides = {}) {
  const std::string path = std::string(ZEROLAP_SOURCE_DIR "/configs/") + config_name;
  // No checkpoints or outputs: this checks learning, not the run's files.
  overrides.insert(overrides.end(), {"checkpoint.dir=\"\"", "train.eval_every=0"});
  if (steps > 0) overrides.push_back("train.steps=" + std::to_string(steps));
  const Config config = load_config(path, overrides);
  Trainer trainer(config, world_of(MPI_COMM_WORLD), quiet_options());
  Learned r;
  r.before = trainer.evaluate();
  for (std::int64_t s = 0; s < trainer.total_steps(); ++s) trainer.train_step();
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

// bf16 (docs/design.md "Precision"): the guide's reference run (docs/guide.md) in bf16 reaches
// the accuracy the fp32 run reaches (87.69%) to within two tenths of a point.
TEST_CASE("the Fashion-MNIST MLP in bf16, 3 epochs, zero/interleaved, reaches 87.5%",
          "[reference-bf16]") {
  const Learned r = train_briefly("fashion_mnist_mlp.toml", 0,
                                  {"precision.compute=bf16", "parallel.mode=zero",
                                   "parallel.overlap=interleaved"});
  INFO("bf16 test accuracy " << r.after.accuracy << ", loss " << r.after.loss);
  CHECK(r.after.accuracy >= 0.875);
}

TEST_CASE("bf16 on the teacher task: the test loss after 300 steps is within 2% of fp32's",
          "[reference-bf16]") {
  const Learned fp32 = train_briefly("teacher_regression.toml", 300);
  const Learned bf16 = train_briefly("teacher_regression.toml", 300, {"precision.compute=bf16"});
  INFO("fp32 loss " << fp32.after.loss << ", bf16 loss " << bf16.after.loss);
  CHECK(bf16.after.loss < 0.25 * bf16.before.loss);  // it learned
  CHECK(std::fabs(bf16.after.loss - fp32.after.loss) <= 0.02 * fp32.after.loss);
}
