// Tests of the TOML config loader (runtime/config/config.h): defaults, every key, every rejected value
// (each message must name the key and file:line, or `--set key`), overrides, the canonical
// to_toml round trip and the hash, and the shipped configs.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"
#include "kernels/gemm.h"
#include "runtime/config/config.h"
#include "runtime/config/global_batch.h"
#include "runtime/config/mode.h"
#include "tests/runtime/error_message_checks.h"

using Catch::Contains;
using Catch::StartsWith;
using zl::Config;
using zl::UserError;

namespace {

constexpr const char* kName = "configs/x.toml";
// Lines 1-2; text appended by with() starts at line 3.
const std::string kMinimal = "[model]\nwidths = [784, 10]\n";

Config parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return zl::parse_config(text, kName, overrides);
}
std::string with(const std::string& extra) { return kMinimal + extra; }

// Every key set to a value other than its default.
const std::string kEveryKey = R"(
[model]
kind = "residual_mlp"
widths = [2, 32, 32, 4]
activation = "gelu"
seed = 7
layernorm_eps = 1e-6

[data]
kind = "spirals"
path = "/data/x"
train_images = "a.idx"
train_labels = "b.idx"
test_images = "c.idx"
test_labels = "d.idx"
batch_size = 16
eval_batch_size = 500
shuffle = false
seed = 11
train_samples = 3000
test_samples = 600
noise = 0.1
teacher_hidden = 48
teacher_task = "classification"

[optimizer]
kind = "sgd"
lr = 0.05
betas = [0.8, 0.99]
eps = 1e-6
weight_decay = 1e-4
momentum = 0.9
dampening = 0.0
nesterov = true
schedule = "cosine"
warmup_steps = 20
min_lr = 1e-4

[parallel]
mode = "zero"
overlap = "after_backward"
collective = "reduce_broadcast"
assignment = "greedy"
bucket_cap_mb = 4
first_bucket_cap_mb = 0.5

[precision]
compute = "tf32"
reduce_dtype = "fp32"
master_weights = "fp32"

[train]
steps = 200
epochs = 0
log_every = 10
eval_every = 50
grad_accum = 2
clip_grad_norm = 1.5

[checkpoint]
dir = "runs/ck"
every = 100
keep = 2
resume = "runs/ck/step_100.safetensors"

[runtime]
device = "cpu"
threads = 4
timeout_s = 60
memory_limit_mb = 4096
comm_priority = "realtime"

[bench]
modes = ["ddp", "zero/after_backward/allreduce_broadcast"]
bucket_cap_mb = [1, 25.5]
precision = ["tf32", "fp32"]
warmup = 2
steps = 10

[link]
bandwidth_gbps = 12.5
latency_us = 3
node_ranks = 4
intra_gbps = 100

[output]
dir = "runs/all"
trace = true
)";

}  // namespace

TEST_CASE("config: defaults fill every key not given", "[config]") {
  const Config c = parse(kMinimal);
  CHECK(c.source_path == kName);
  CHECK(c.model.kind == zl::ModelKind::Mlp);
  CHECK(c.model.widths == std::vector<std::int64_t>{784, 10});
  CHECK(c.model.activation == zl::Activation::Relu);
  CHECK(c.data.kind == zl::DataKind::FashionMnist);
  CHECK(c.data.path == zl::kDefaultFashionMnistDir);
  CHECK(c.data.batch_size == 64);
  CHECK(c.optimizer.kind == zl::OptimizerKind::Adam);
  CHECK(c.optimizer.lr == 1e-3f);
  CHECK(c.optimizer.beta1 == 0.9f);
  CHECK(c.optimizer.beta2 == 0.999f);
  CHECK(c.parallel.mode == zl::ParallelMode::Ddp);
  CHECK(c.parallel.overlap == zl::Overlap::None);
  CHECK(c.parallel.bucket_cap_mb == 25.0);
  // Neither steps nor epochs given: one epoch.
  CHECK(c.train.steps == 0);
  CHECK(c.train.epochs == 1);
  CHECK(c.checkpoint.resume == false);
  CHECK(c.runtime.device == zl::DeviceChoice::Auto);
  CHECK(c.runtime.threads == zl::kAutoThreads);
  CHECK(c.runtime.timeout_s == 300.0);
  CHECK(c.runtime.comm_priority == zl::CommPriority::Normal);
  CHECK(c.bench.modes.empty());
  CHECK_FALSE(c.link.enabled());
  CHECK(c.output.dir == "runs/default");

  // Everything else is the struct's default.
  Config expected;
  expected.model.widths = {784, 10};
  expected.train.epochs = 1;
  CHECK(zl::to_toml(c) == zl::to_toml(expected));
}

TEST_CASE("config: steps = 0 or epochs = 0 given explicitly means no training", "[config]") {
  CHECK(parse(with("[train]\nsteps = 0\n")).train.epochs == 0);
  CHECK(parse(with("[train]\nepochs = 0\n")).train.epochs == 0);
  const Config c = parse(with("[train]\nsteps = 500\n"));
  CHECK(c.train.steps == 500);
  CHECK(c.train.epochs == 0);
}

TEST_CASE("config: every key parses", "[config]") {
  const Config c = parse(kEveryKey);
  CHECK(c.model.kind == zl::ModelKind::ResidualMlp);
  CHECK(c.model.widths == std::vector<std::int64_t>{2, 32, 32, 4});
  CHECK(c.model.activation == zl::Activation::Gelu);
  CHECK(c.model.seed == 7);
  CHECK(c.model.layernorm_eps == 1e-6f);

  CHECK(c.data.kind == zl::DataKind::Spirals);
  CHECK(c.data.path == "/data/x");
  CHECK(c.data.train_images == "a.idx");
  CHECK(c.data.train_labels == "b.idx");
  CHECK(c.data.test_images == "c.idx");
  CHECK(c.data.test_labels == "d.idx");
  CHECK(c.data.batch_size == 16);
  CHECK(c.data.eval_batch_size == 500);
  CHECK(c.data.shuffle == false);
  CHECK(c.data.seed == 11);
  CHECK(c.data.train_samples == 3000);
  CHECK(c.data.test_samples == 600);
  CHECK(c.data.noise == 0.1f);
  CHECK(c.data.teacher_hidden == 48);
  CHECK(c.data.teacher_task == zl::TaskKind::Classification);

  CHECK(c.optimizer.kind == zl::OptimizerKind::Sgd);
  CHECK(c.optimizer.lr == 0.05f);
  CHECK(c.optimizer.beta1 == 0.8f);
  CHECK(c.optimizer.beta2 == 0.99f);
  CHECK(c.optimizer.eps == 1e-6f);
  CHECK(c.optimizer.weight_decay == 1e-4f);
  CHECK(c.optimizer.momentum == 0.9f);
  CHECK(c.optimizer.dampening == 0.0f);
  CHECK(c.optimizer.nesterov == true);
  CHECK(c.optimizer.schedule == zl::LrSchedule::Cosine);
  CHECK(c.optimizer.warmup_steps == 20);
  CHECK(c.optimizer.min_lr == 1e-4f);

  CHECK(c.parallel.mode == zl::ParallelMode::Zero);
  CHECK(c.parallel.overlap == zl::Overlap::AfterBackward);
  CHECK(c.parallel.collective == zl::CollectiveKind::ReduceBroadcast);
  CHECK(c.parallel.assignment == zl::AssignmentPolicy::Greedy);
  CHECK(c.parallel.bucket_cap_mb == 4.0);  // an integer where a float is expected
  CHECK(c.parallel.first_bucket_cap_mb == 0.5);

  CHECK(c.precision.compute == zl::ComputePrecision::Tf32);
  CHECK(c.precision.reduce_dtype == zl::DType::F32);
  CHECK(c.precision.master_weights == zl::MasterWeights::Fp32);

  CHECK(c.train.steps == 200);
  CHECK(c.train.epochs == 0);
  CHECK(c.train.log_every == 10);
  CHECK(c.train.eval_every == 50);
  CHECK(c.train.grad_accum == 2);
  CHECK(c.train.clip_grad_norm == 1.5f);

  CHECK(c.checkpoint.dir == "runs/ck");
  CHECK(c.checkpoint.every == 100);
  CHECK(c.checkpoint.keep == 2);
  CHECK(c.checkpoint.resume == true);
  CHECK(c.checkpoint.resume_path == "runs/ck/step_100.safetensors");

  CHECK(c.runtime.device == zl::DeviceChoice::Cpu);
  CHECK(c.runtime.threads == 4);
  CHECK(c.runtime.timeout_s == 60.0);
  CHECK(c.runtime.comm_priority == zl::CommPriority::Realtime);

  CHECK(c.bench.modes == std::vector<std::string>{"ddp", "zero/after_backward/allreduce_broadcast"});
  CHECK(c.bench.bucket_cap_mb == std::vector<double>{1.0, 25.5});
  CHECK(c.bench.precision ==
        std::vector<zl::ComputePrecision>{zl::ComputePrecision::Tf32, zl::ComputePrecision::Fp32});
  CHECK(c.bench.warmup == 2);
  CHECK(c.bench.steps == 10);

  CHECK(c.link.bandwidth_gbps == 12.5);
  CHECK(c.link.latency_us == 3.0);
  CHECK(c.link.node_ranks == 4);
  CHECK(c.link.intra_gbps == 100.0);
  CHECK(c.link.enabled());

  CHECK(c.output.dir == "runs/all");
  CHECK(c.output.trace == true);
}

TEST_CASE("config: [precision] defaults, values and rejected combinations", "[config]") {
  const Config d = parse(kMinimal);
  CHECK(d.precision.compute == zl::ComputePrecision::Fp32);
  CHECK(d.precision.reduce_dtype == zl::DType::F32);
  CHECK(d.precision.master_weights == zl::MasterWeights::Fp32);
  CHECK(parse(with("[precision]\ncompute = \"tf32\"\n")).precision.compute ==
        zl::ComputePrecision::Tf32);
  REQUIRE_THROWS_WITH(parse(with("[precision]\ncompute = \"fp16\"\n")),
                      Contains("configs/x.toml:4: precision.compute: expected one of \"fp32\", "
                               "\"tf32\", \"bf16\", got \"fp16\""));
  REQUIRE_THROWS_WITH(parse(with("[precision]\nreduce_dtype = \"fp16\"\n")),
                      Contains("configs/x.toml:4: precision.reduce_dtype: expected one of"));
  REQUIRE_THROWS_WITH(parse(with("[precision]\nmaster_weights = \"none\"\n")),
                      Contains("configs/x.toml:4: precision.master_weights: expected one of"));
  REQUIRE_THROWS_WITH(parse(with("[precision]\nmaster = \"fp32\"\n")),
                      Contains("unknown key 'precision.master'"));
  REQUIRE_THROWS_WITH(parse(with("[precision]\ncompute = \"tf32\"\nmaster_weights = "
                                 "\"remainders\"\n")),
                      Contains("configs/x.toml:5: precision.master_weights: \"remainders\" keeps "
                               "the 16 bits a bf16 parameter drops, so it needs compute = \"bf16\" "
                               "(got compute = \"tf32\")"));
  REQUIRE_THROWS_WITH(parse(with("[precision]\nreduce_dtype = \"bf16\"\n")),
                      Contains("configs/x.toml:4: precision.reduce_dtype: \"bf16\" rounds bf16 "
                               "gradients for the wire, so it needs compute = \"bf16\""));
  const std::string bf16 =
      with("[precision]\ncompute = \"bf16\"\nreduce_dtype = \"bf16\"\n"
           "master_weights = \"remainders\"\n");
  // Accepted on every CPU: without a bf16 matmul the GEMMs run through fp32 (kernels/gemm.h).
  for (const char* device : {"runtime.device=\"cpu\"", "runtime.device=\"auto\""}) {
    INFO(device);
    const Config c = parse(bf16, {device});
    CHECK(c.precision.compute == zl::ComputePrecision::Bf16);
    CHECK(c.precision.reduce_dtype == zl::DType::BF16);
    CHECK(c.precision.master_weights == zl::MasterWeights::Remainders);
    const Config back = zl::parse_config(zl::to_toml(c), "canonical.toml");
    CHECK(zl::to_toml(back) == zl::to_toml(c));
    CHECK(zl::config_hash(c) != zl::config_hash(d));  // precision changes results
  }
  // And in the bench's list.
  CHECK(parse(with("[bench]\nprecision = [\"fp32\", \"bf16\"]\n"), {"runtime.device=\"cpu\""})
            .bench.precision.size() == 2);
  // On CUDA the GEMMs are cuBLAS's, whatever the CPU has.
  CHECK(parse(bf16, {"runtime.device=\"cuda\""}).precision.compute == zl::ComputePrecision::Bf16);
  Config tf32 = d;
  tf32.precision.compute = zl::ComputePrecision::Tf32;
  CHECK(zl::config_hash(tf32) != zl::config_hash(d));
  CHECK_THAT(zl::to_toml(d), Contains("[precision]\ncompute = \"fp32\"\nreduce_dtype = "
                                      "\"fp32\"\nmaster_weights = \"fp32\"\n"));
}

TEST_CASE("config: other accepted spellings", "[config]") {
  CHECK(parse(with("[optimizer]\nlr = 1\n")).optimizer.lr == 1.0f);
  CHECK(parse(with("[bench]\nbucket_cap_mb = 8.0\n")).bench.bucket_cap_mb ==
        std::vector<double>{8.0});
  CHECK(parse(with("[bench]\nbucket_cap_mb = 3\n")).bench.bucket_cap_mb ==
        std::vector<double>{3.0});
  CHECK(parse(with("[checkpoint]\ndir = \"ck\"\nresume = true\n")).checkpoint.resume);
  CHECK(parse(with("[checkpoint]\nresume = false\n")).checkpoint.resume == false);
  CHECK(parse(with("[runtime]\nthreads = \"auto\"\n")).runtime.threads == zl::kAutoThreads);
  CHECK(parse("[model]\nwidths = [784, 10]\nactivation = \"identity\"\n").model.activation ==
        zl::Activation::Identity);
  CHECK(parse("model = { widths = [784, 10], activation = \"tanh\" }\n").model.activation ==
        zl::Activation::Tanh);
  const Config idx =
      parse(with("[data]\nkind = \"idx\"\ntrain_images = \"a\"\ntrain_labels = "
                 "\"b\"\ntest_images = \"c\"\ntest_labels = \"d\"\n"));
  CHECK(idx.data.kind == zl::DataKind::Idx);
  const Config teacher = parse(
      "[model]\nwidths = [16, 8]\n[data]\nkind = \"teacher\"\nteacher_task = \"regression\"\n");
  CHECK(teacher.data.teacher_task == zl::TaskKind::Regression);
}

TEST_CASE("config: rejected values name the key and file:line", "[config]") {
  // with(): the appended text starts at line 3, so "[section]\nkey = ..." puts the key on line 4.
  SECTION("optimizer") {
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nlr = -1\n")),
                        "configs/x.toml:4: optimizer.lr: must be > 0 (got -1)");
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nlr = 0.0\n")),
                        Contains("configs/x.toml:4: optimizer.lr: must be > 0"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nlr = 1e-50\n")),  // 0 as a float
                        Contains("configs/x.toml:4: optimizer.lr: must be > 0"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nlr = inf\n")),
                        Contains("configs/x.toml:4: optimizer.lr: must be a finite"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nlr = \"fast\"\n")),
                        "configs/x.toml:4: optimizer.lr: expected a number, got string (\"fast\")");
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nbetas = [0.9]\n")),
                        Contains("configs/x.toml:4: optimizer.betas: expected 2 numbers, got 1"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nbetas = [0.9, 1.0]\n")),
                        Contains("configs/x.toml:4: optimizer.betas: element 1 must be in [0, 1)"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nbetas = [-0.1, 0.9]\n")),
                        Contains("configs/x.toml:4: optimizer.betas: element 0 must be in [0, 1)"));
    REQUIRE_THROWS_WITH(
        parse(with("[optimizer]\nbetas = 0.9\n")),
        Contains("configs/x.toml:4: optimizer.betas: expected an array of numbers"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\neps = 0\n")),
                        Contains("configs/x.toml:4: optimizer.eps: must be > 0"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nweight_decay = -0.1\n")),
                        Contains("configs/x.toml:4: optimizer.weight_decay: must be >= 0"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nmomentum = -1\n")),
                        Contains("configs/x.toml:4: optimizer.momentum: must be >= 0"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\ndampening = 1.5\n")),
                        Contains("configs/x.toml:4: optimizer.dampening: must be in [0, 1]"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nkind = \"sgd\"\nnesterov = true\n")),
                        Contains("configs/x.toml:5: optimizer.nesterov: requires momentum > 0 and "
                                 "dampening = 0"));
    REQUIRE_THROWS_WITH(
        parse(with(
            "[optimizer]\nkind = \"sgd\"\nmomentum = 0.9\ndampening = 0.1\nnesterov = true\n")),
        Contains("configs/x.toml:7: optimizer.nesterov: requires momentum > 0 and dampening = 0"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nwarmup_steps = -1\n")),
                        Contains("configs/x.toml:4: optimizer.warmup_steps: must be >= 0"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nmin_lr = -1e-5\n")),
                        Contains("configs/x.toml:4: optimizer.min_lr: must be >= 0"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nlr = 0.01\nmin_lr = 0.1\n")),
                        Contains("configs/x.toml:5: optimizer.min_lr: must be in [0, lr]"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nkind = \"lion\"\n")),
                        "configs/x.toml:4: optimizer.kind: expected one of \"adam\", \"adamw\", "
                        "\"sgd\", got \"lion\"");
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nschedule = \"linear\"\n")),
                        Contains("configs/x.toml:4: optimizer.schedule: expected one of "
                                 "\"constant\", \"cosine\""));
  }
  SECTION("unknown keys and sections, with a did-you-mean") {
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nlrr = 1\n")),
                        "configs/x.toml:4: unknown key 'optimizer.lrr' (did you mean 'lr'?)");
    REQUIRE_THROWS_WITH(parse(with("[model]\n")),  // a table defined twice is a TOML error
                        Contains("configs/x.toml:3: TOML syntax error"));
    REQUIRE_THROWS_WITH(parse("[model]\nwidht = [784, 10]\n"),
                        "configs/x.toml:2: unknown key 'model.widht' (did you mean 'widths'?)");
    REQUIRE_THROWS_WITH(parse(with("[train]\nqwerty = 1\n")),
                        "configs/x.toml:4: unknown key 'train.qwerty'");
    REQUIRE_THROWS_WITH(parse(with("[optimizr]\nlr = 1\n")),
                        "configs/x.toml:3: unknown section [optimizr] (did you mean [optimizer]?)");
    REQUIRE_THROWS_WITH(parse("lr = 1\n" + kMinimal),
                        Contains("configs/x.toml:1: unknown key 'lr' at the top level"));
    REQUIRE_THROWS_WITH(parse("model = 3\n"),
                        "configs/x.toml:1: 'model' must be a section [model], got integer");
    REQUIRE_THROWS_WITH(parse(with("[optimizer.extra]\nx = 1\n")),
                        Contains("unknown key 'optimizer.extra'"));
  }
  SECTION("TOML syntax errors carry the line") {
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nlr = = 1\n")),
                        Contains("configs/x.toml:4: TOML syntax error"));
    REQUIRE_THROWS_WITH(parse(with("[optimizer]\nlr = 1\nlr = 2\n")),
                        Contains("configs/x.toml:5: TOML syntax error"));
  }
  SECTION("model") {
    REQUIRE_THROWS_WITH(
        parse("[model]\nwidths = \"784\"\n"),
        "configs/x.toml:2: model.widths: expected an array of integers, got string");
    REQUIRE_THROWS_WITH(parse("[model]\nwidths = [\n  784,\n  1.5,\n  10,\n]\n"),
                        "configs/x.toml:4: model.widths: expected an array of integers, got float "
                        "at index 1");
    REQUIRE_THROWS_WITH(parse("[model]\nkind = \"mlp\"\n"),
                        Contains("configs/x.toml:1: model.widths: is required"));
    REQUIRE_THROWS_WITH(parse(""), Contains("configs/x.toml: model.widths: is required"));
    REQUIRE_THROWS_WITH(parse("[model]\nwidths = [784]\n"),
                        Contains("configs/x.toml:2: model.widths: widths has 1 entries"));
    REQUIRE_THROWS_WITH(parse("[model]\nwidths = [784, 0, 10]\n"),
                        Contains("configs/x.toml:2: model.widths: "));
    REQUIRE_THROWS_WITH(parse("[model]\nkind = \"residual_mlp\"\nwidths = [784, 64, 32, 10]\n"),
                        Contains("configs/x.toml:3: model.widths: residual_mlp needs equal inner "
                                 "widths"));
    REQUIRE_THROWS_WITH(parse("[model]\nwidths = [784, 10]\nactivation = \"swish\"\n"),
                        "configs/x.toml:3: model.activation: expected one of \"relu\", \"gelu\", "
                        "\"tanh\", \"identity\", got \"swish\"");
    REQUIRE_THROWS_WITH(parse("[model]\nwidths = [784, 10]\nseed = -1\n"),
                        "configs/x.toml:3: model.seed: must be >= 0 (got -1)");
    REQUIRE_THROWS_WITH(parse("[model]\nwidths = [784, 10]\nseed = 1.0\n"),
                        "configs/x.toml:3: model.seed: expected an integer, got float (1.0)");
    REQUIRE_THROWS_WITH(parse("[model]\nwidths = [784, 10]\nlayernorm_eps = 0\n"),
                        Contains("configs/x.toml:3: model.layernorm_eps: must be > 0"));
    REQUIRE_THROWS_WITH(parse("[model]\nkind = \"cnn\"\nwidths = [784, 10]\n"),
                        Contains("configs/x.toml:2: model.kind: expected one of \"mlp\", "
                                 "\"residual_mlp\""));
  }
  SECTION("data") {
    REQUIRE_THROWS_WITH(parse(with("[data]\nbatch_size = 0\n")),
                        "configs/x.toml:4: data.batch_size: must be in [1, 1099511627776] (got 0)");
    REQUIRE_THROWS_WITH(parse(with("[data]\nbatch_size = 64.0\n")),
                        "configs/x.toml:4: data.batch_size: expected an integer, got float (64.0)");
    REQUIRE_THROWS_WITH(parse(with("[data]\neval_batch_size = 0\n")),
                        Contains("configs/x.toml:4: data.eval_batch_size: must be in [1, 1099511627776]"));
    REQUIRE_THROWS_WITH(parse(with("[data]\nshuffle = 1\n")),
                        "configs/x.toml:4: data.shuffle: expected true or false, got integer (1)");
    REQUIRE_THROWS_WITH(parse(with("[data]\nnoise = -0.5\n")),
                        Contains("configs/x.toml:4: data.noise: must be >= 0"));
    REQUIRE_THROWS_WITH(parse(with("[data]\nkind = \"cifar\"\n")),
                        Contains("configs/x.toml:4: data.kind: expected one of \"fashion_mnist\", "
                                 "\"idx\", \"spirals\", \"teacher\""));
    REQUIRE_THROWS_WITH(parse(with("[data]\nkind = \"idx\"\ntrain_images = \"a\"\n")),
                        Contains("configs/x.toml:4: data.kind: \"idx\" needs the four IDX files"));
    REQUIRE_THROWS_WITH(parse(with("[data]\nkind = \"idx\"\ntrain_images = \"a\"\n")),
                        Contains("missing: data.train_labels, data.test_images, data.test_labels"));
    REQUIRE_THROWS_WITH(parse(with("[data]\npath = \"\"\n")),
                        Contains("configs/x.toml:4: data.path: must name the Fashion-MNIST"));
    REQUIRE_THROWS_WITH(parse("[model]\nwidths = [100, 10]\n"),
                        Contains("configs/x.toml:2: model.widths: data.kind = \"fashion_mnist\" "
                                 "needs 784 inputs"));
    REQUIRE_THROWS_WITH(parse("[model]\nwidths = [3, 8, 3]\n[data]\nkind = \"spirals\"\n"),
                        Contains("configs/x.toml:2: model.widths: data.kind = \"spirals\" needs 2 "
                                 "inputs"));
    REQUIRE_THROWS_WITH(parse("[model]\nwidths = [8, 1]\n[data]\nkind = \"teacher\"\n"
                              "teacher_task = \"classification\"\n"),
                        Contains("configs/x.toml:2: model.widths: a teacher classification"));
    REQUIRE_THROWS_WITH(parse(with("[data]\nteacher_task = \"ranking\"\n")),
                        Contains("configs/x.toml:4: data.teacher_task: expected one of "
                                 "\"regression\", \"classification\""));
  }
  SECTION("train") {
    REQUIRE_THROWS_WITH(parse(with("[train]\nsteps = -1\n")),
                        "configs/x.toml:4: train.steps: must be >= 0 (got -1)");
    REQUIRE_THROWS_WITH(parse(with("[train]\nepochs = -2\n")),
                        "configs/x.toml:4: train.epochs: must be >= 0 (got -2)");
    REQUIRE_THROWS_WITH(parse(with("[train]\nepochs = 2\nsteps = 10\n")),
                        "configs/x.toml:5: train.steps: set either steps or epochs, not both "
                        "(steps = 10, epochs = 2 at configs/x.toml:4)");
    REQUIRE_THROWS_WITH(parse(with("[train]\ngrad_accum = 0\n")),
                        Contains("configs/x.toml:4: train.grad_accum: must be in [1, 65536] "
                                 "(got 0)"));
    REQUIRE_THROWS_WITH(parse(with("[train]\nclip_grad_norm = -1\n")),
                        Contains("configs/x.toml:4: train.clip_grad_norm: must be >= 0"));
    REQUIRE_THROWS_WITH(parse(with("[train]\nlog_every = 0\n")),
                        Contains("configs/x.toml:4: train.log_every: must be >= 1"));
    REQUIRE_THROWS_WITH(parse(with("[train]\neval_every = -1\n")),
                        Contains("configs/x.toml:4: train.eval_every: must be >= 0"));
  }
  SECTION("parallel, and its combinations with train") {
    REQUIRE_THROWS_WITH(parse(with("[parallel]\nbucket_cap_mb = 0\n")),
                        "configs/x.toml:4: parallel.bucket_cap_mb: must be in (0, 1048576] (got 0)");
    REQUIRE_THROWS_WITH(parse(with("[parallel]\nfirst_bucket_cap_mb = -1.0\n")),
                        Contains("configs/x.toml:4: parallel.first_bucket_cap_mb: must be in (0, 1048576]"));
    REQUIRE_THROWS_WITH(parse(with("[parallel]\nmode = \"fsdp\"\n")),
                        Contains("configs/x.toml:4: parallel.mode: expected one of \"ddp\", "
                                 "\"zero\", got \"fsdp\""));
    REQUIRE_THROWS_WITH(parse(with("[parallel]\ncollective = \"ring\"\n")),
                        Contains("configs/x.toml:4: parallel.collective: expected one of"));
    REQUIRE_THROWS_WITH(parse(with("[parallel]\nassignment = \"random\"\n")),
                        Contains("configs/x.toml:4: parallel.assignment: expected one of"));
    REQUIRE_THROWS_WITH(parse(with("[parallel]\noverlap = \"after_backward\"\n")),
                        Contains("configs/x.toml:4: parallel.overlap: \"after_backward\" applies "
                                 "to mode = \"zero\" only"));
    const std::string interleaved_clip = with(
        "[parallel]\nmode = \"zero\"\noverlap = \"interleaved\"\n[train]\nclip_grad_norm = 1.0\n");
    REQUIRE_THROWS_WITH(parse(interleaved_clip),
                        Contains("configs/x.toml:5: parallel.overlap: \"interleaved\" cannot be "
                                 "combined with train.clip_grad_norm = 1 (at configs/x.toml:7)"));
    REQUIRE_THROWS_WITH(parse(interleaved_clip), Contains("the global gradient norm"));
    // Either one alone is fine.
    CHECK(
        parse(with("[parallel]\nmode = \"zero\"\noverlap = \"interleaved\"\n")).parallel.overlap ==
        zl::Overlap::Interleaved);
    CHECK(parse(with("[parallel]\nmode = \"zero\"\noverlap = \"after_backward\"\n[train]\n"
                     "clip_grad_norm = 1.0\n"))
              .train.clip_grad_norm == 1.0f);
  }
  SECTION("train.on_nonfinite") {
    CHECK(parse(kMinimal).train.on_nonfinite == zl::OnNonfinite::Stop);
    const Config skip = parse(with("[train]\non_nonfinite = \"skip_step\"\n"));
    CHECK(skip.train.on_nonfinite == zl::OnNonfinite::SkipStep);
    CHECK_THAT(zl::to_toml(skip), Contains("\non_nonfinite = \"skip_step\"\n"));
    CHECK(zl::parse_config(zl::to_toml(skip), "canonical.toml").train.on_nonfinite ==
          zl::OnNonfinite::SkipStep);
    // It changes what a run computes once a step is not finite: ranks must agree on it.
    CHECK(zl::key_affects_results("train.on_nonfinite"));
    CHECK(zl::config_hash(skip) != zl::config_hash(parse(kMinimal)));
    REQUIRE_THROWS_WITH(parse(with("[train]\non_nonfinite = \"ignore\"\n")),
                        Contains("configs/x.toml:4: train.on_nonfinite: expected one of \"stop\", "
                                 "\"skip_step\", got \"ignore\""));
    const std::string interleaved_skip =
        with("[parallel]\nmode = \"zero\"\noverlap = \"interleaved\"\n[train]\non_nonfinite = "
             "\"skip_step\"\n");
    REQUIRE_THROWS_WITH(parse(interleaved_skip),
                        Contains("configs/x.toml:7: train.on_nonfinite: \"skip_step\" cannot be "
                                 "combined with parallel.overlap = \"interleaved\" (at "
                                 "configs/x.toml:5)"));
    CHECK(parse(with("[parallel]\nmode = \"zero\"\noverlap = \"after_backward\"\n[train]\n"
                     "on_nonfinite = \"skip_step\"\n"))
              .train.on_nonfinite == zl::OnNonfinite::SkipStep);
    CHECK(parse(kMinimal).train.max_loss == 0.0);
    const Config limited = parse(with("[train]\nmax_loss = 1e6\n"));
    CHECK(limited.train.max_loss == 1e6);
    CHECK_THAT(zl::to_toml(limited), Contains("\nmax_loss = 1000000.0\n"));
    CHECK(zl::config_hash(limited) != zl::config_hash(parse(kMinimal)));
    REQUIRE_THROWS_WITH(parse(with("[train]\nmax_loss = -1.0\n")),
                        Contains("configs/x.toml:4: train.max_loss: must be >= 0"));
  }
  SECTION("checkpoint, runtime, bench, link, output") {
    REQUIRE_THROWS_WITH(parse(with("[checkpoint]\nkeep = 0\n")),
                        "configs/x.toml:4: checkpoint.keep: must be >= 1 (got 0)");
    REQUIRE_THROWS_WITH(parse(with("[checkpoint]\nevery = -1\n")),
                        Contains("configs/x.toml:4: checkpoint.every: must be >= 0"));
    REQUIRE_THROWS_WITH(parse(with("[checkpoint]\nresume = true\n")),
                        Contains("configs/x.toml:4: checkpoint.resume: true needs checkpoint.dir"));
    REQUIRE_THROWS_WITH(parse(with("[checkpoint]\nresume = 3\n")),
                        "configs/x.toml:4: checkpoint.resume: expected true, false or a checkpoint "
                        "path, got integer (3)");
    REQUIRE_THROWS_WITH(parse(with("[checkpoint]\nresume = \"\"\n")),
                        Contains("configs/x.toml:4: checkpoint.resume: an empty path"));
    REQUIRE_THROWS_WITH(parse(with("[runtime]\nthreads = 0\n")),
                        Catch::StartsWith("configs/x.toml:4: runtime.threads: must be in [1, 1024] or \"auto\" (got 0): the OpenMP team"));
    REQUIRE_THROWS_WITH(parse(with("[runtime]\nthreads = 3000000000\n")),
                        Contains("configs/x.toml:4: runtime.threads: must be in [1, 1024]"));
    REQUIRE_THROWS_WITH(parse(with("[runtime]\nthreads = \"all\"\n")),
                        "configs/x.toml:4: runtime.threads: expected an integer >= 1 or \"auto\", "
                        "got string (\"all\")");
    REQUIRE_THROWS_WITH(parse(with("[runtime]\nthreads = 2.0\n")),
                        Contains("runtime.threads: expected an integer >= 1 or \"auto\", got float"));
    REQUIRE_THROWS_WITH(parse(with("[runtime]\ntimeout_s = 0\n")),
                        Contains("configs/x.toml:4: runtime.timeout_s: must be in [1, 31536000]"));
    REQUIRE_THROWS_WITH(parse(with("[runtime]\ntimeout_s = 0.01\n")),
                        Contains("runtime.timeout_s: must be in [1, 31536000]"));
    REQUIRE_THROWS_WITH(parse(with("[runtime]\ndevice = \"tpu\"\n")),
                        "configs/x.toml:4: runtime.device: expected one of \"auto\", \"cpu\", "
                        "\"cuda\", got \"tpu\"");
    REQUIRE_THROWS_WITH(parse(with("[runtime]\ncomm_priority = \"high\"\n")),
                        "configs/x.toml:4: runtime.comm_priority: expected one of \"normal\", "
                        "\"realtime\", got \"high\"");
    REQUIRE_THROWS_WITH(parse(with("[bench]\nwarmup = -1\n")),
                        Contains("configs/x.toml:4: bench.warmup: must be in [0, 1099511627776]"));
    REQUIRE_THROWS_WITH(parse(with("[bench]\nsteps = 0\n")),
                        Contains("configs/x.toml:4: bench.steps: must be in [1, 1099511627776]"));
    REQUIRE_THROWS_WITH(parse(with("[bench]\nrounds = 0\n")),
                        Contains("configs/x.toml:4: bench.rounds: must be in [1, 1000]"));
    REQUIRE_THROWS_WITH(parse(with("[bench]\nbucket_cap_mb = [1.0,\n  0]\n")),
                        Contains("configs/x.toml:5: bench.bucket_cap_mb: element 1 must be in (0, 1048576]"));
    REQUIRE_THROWS_WITH(parse(with("[bench]\nbucket_cap_mb = \"big\"\n")),
                        Contains("configs/x.toml:4: bench.bucket_cap_mb: expected an array of "
                                 "numbers or a number, got string"));
    REQUIRE_THROWS_WITH(parse(with("[bench]\nmodes = [\"ddp\", 1]\n")),
                        Contains("configs/x.toml:4: bench.modes: expected an array of strings, got "
                                 "integer at index 1"));
    // A cap listed twice ran every mode twice, as two rows of the same name.
    REQUIRE_THROWS_WITH(parse(with("[bench]\nbucket_cap_mb = [1, 2, 1.0]\n")),
                        Contains("configs/x.toml:4: bench.bucket_cap_mb: 1 is listed twice"));
    REQUIRE_THROWS_WITH(parse(with("[bench]\nmodes = [\"ddp\", \"ddp\"]\n")),
                        Contains("configs/x.toml:4: bench.modes: \"ddp\" is listed twice"));
    // An empty list is the default (every mode, the config's cap and precision): it is how the
    // effective config (`zerolap config`, a run's config.toml) writes that default.
    CHECK(parse(with("[bench]\nmodes = []\nbucket_cap_mb = []\nprecision = []\n")).bench.modes.empty());
    // bench.precision: one value or a list of the precision.compute names.
    CHECK(parse(with("[bench]\nprecision = \"tf32\"\n")).bench.precision ==
          std::vector<zl::ComputePrecision>{zl::ComputePrecision::Tf32});
    CHECK(parse(with("")).bench.precision.empty());
    REQUIRE_THROWS_WITH(parse(with("[bench]\nprecision = [\"fp32\", \"fp16\"]\n")),
                        "configs/x.toml:4: bench.precision: expected one of \"fp32\", \"tf32\", "
                        "\"bf16\", got \"fp16\"");
    REQUIRE_THROWS_WITH(parse(with("[bench]\nprecision = [\"fp32\", \"fp32\"]\n")),
                        Contains("configs/x.toml:4: bench.precision: \"fp32\" is listed twice"));
    CHECK(parse(with("[bench]\nprecision = []\n")).bench.precision.empty());  // the default
    REQUIRE_THROWS_WITH(parse(with("[bench]\nprecision = 16\n")),
                        Contains("configs/x.toml:4: bench.precision: expected one of"));
    REQUIRE_THROWS_WITH(parse(with("[link]\nbandwidth_gbps = -1\n")),
                        Contains("configs/x.toml:4: link.bandwidth_gbps: must be in [0, 1000000]"));
    REQUIRE_THROWS_WITH(parse(with("[link]\nlatency_us = -0.5\n")),
                        Contains("configs/x.toml:4: link.latency_us: must be in [0, 10000000]"));
    // 1e300 must be refused: the modelled time would overflow its cast to a clock duration.
    REQUIRE_THROWS_WITH(parse(with("[link]\nlatency_us = 1e300\n")),
                        Contains("configs/x.toml:4: link.latency_us: must be in [0, 10000000]"));
    REQUIRE_THROWS_WITH(parse(with("[link]\nbandwidth_gbps = 1e300\n")),
                        Contains("link.bandwidth_gbps: must be in [0, 1000000]"));
    REQUIRE_THROWS_WITH(parse(with("[link]\nbandwidth_gbps = 1e-300\n")),
                        Contains("link.bandwidth_gbps") && Contains("slowest link"));
    REQUIRE_THROWS_WITH(parse(with("[link]\nranks = 8\n")),
                        "configs/x.toml:4: link.ranks: 8 ranks are timed on a modelled link, but "
                        "link.bandwidth_gbps and link.latency_us are both 0 (no link); set one of "
                        "them");
    // Two tiers (Note [Link model]): both bandwidths, the node's at least the network's.
    CHECK(parse(kMinimal).link.node_ranks == 0);
    const Config tiers =
        parse(with("[link]\nbandwidth_gbps = 400\nnode_ranks = 8\nintra_gbps = 3600\n"));
    CHECK(tiers.link.node_ranks == 8);
    CHECK(tiers.link.intra_gbps == 3600.0);
    CHECK_THAT(zl::to_toml(tiers), Contains("\nnode_ranks = 8\nintra_gbps = 3600.0\n"));
    REQUIRE_THROWS_WITH(parse(with("[link]\nbandwidth_gbps = 400\nnode_ranks = -1\n")),
                        Contains("configs/x.toml:5: link.node_ranks: must be in [0, 1048576]"));
    REQUIRE_THROWS_WITH(parse(with("[link]\nbandwidth_gbps = 400\nintra_gbps = -1\n")),
                        Contains("configs/x.toml:5: link.intra_gbps: must be in [0, 1000000]"));
    REQUIRE_THROWS_WITH(parse(with("[link]\nbandwidth_gbps = 400\nnode_ranks = 8\n")),
                        "configs/x.toml:5: link.node_ranks: nodes of 8 ranks need the bandwidth "
                        "inside a node: set link.intra_gbps (at least link.bandwidth_gbps = 400)");
    REQUIRE_THROWS_WITH(parse(with("[link]\nbandwidth_gbps = 400\nintra_gbps = 3600\n")),
                        "configs/x.toml:5: link.intra_gbps: 3600 Gb/s inside a modelled node, but "
                        "no node: set link.node_ranks, the ranks of one node");
    REQUIRE_THROWS_WITH(
        parse(with("[link]\nbandwidth_gbps = 400\nnode_ranks = 8\nintra_gbps = 100\n")),
        "configs/x.toml:6: link.intra_gbps: 100 Gb/s inside a node is below "
        "link.bandwidth_gbps = 400 between nodes (at configs/x.toml:4): a node's links are at "
        "least as fast as its network port; raise link.intra_gbps or lower link.bandwidth_gbps");
    // No link, or a latency alone: no network bandwidth for the tiers to differ from.
    for (const char* link : {"", "latency_us = 5\n"}) {
      REQUIRE_THROWS_WITH(
          parse(with(std::string("[link]\n") + link + "node_ranks = 8\nintra_gbps = 3600\n")),
          Contains("link.node_ranks: nodes of 8 ranks need link.bandwidth_gbps > 0"));
    }
    REQUIRE_THROWS_WITH(parse(kMinimal, {"link.bandwidth_gbps=400", "link.node_ranks=2"}),
                        Contains("--set link.node_ranks: link.node_ranks: nodes of 2 ranks need") &&
                            Contains("set link.intra_gbps"));
    REQUIRE_THROWS_WITH(parse(with("[output]\ndir = \"\"\n")),
                        "configs/x.toml:4: output.dir: must not be empty");
    REQUIRE_THROWS_WITH(parse(with("[output]\ntrace = \"yes\"\n")),
                        Contains("configs/x.toml:4: output.trace: expected true or false, got "
                                 "string"));
  }
  SECTION("errors are UserError") {
    REQUIRE_THROWS_AS(parse(with("[optimizer]\nlr = -1\n")), UserError);
    REQUIRE_THROWS_AS(parse(with("[optimizer]\nlr = = 1\n")), UserError);
    REQUIRE_THROWS_AS(parse(with("[optimizr]\n")), UserError);
    REQUIRE_THROWS_AS(parse(kMinimal, {"nonsense"}), UserError);
  }
}

TEST_CASE("config: a NUL byte in a path is refused, naming the key", "[config]") {
  // A C call opening the path would stop at the NUL: the run would read or write another file
  // than the one the config names. TOML writes one as the escape \u0000.
  const std::string nul = "runs/a\\u0000b";
  const std::pair<const char*, const char*> keys[] = {
      {"data", "path"},          {"data", "train_images"}, {"data", "train_labels"},
      {"data", "test_images"},   {"data", "test_labels"},  {"checkpoint", "dir"},
      {"checkpoint", "resume"},  {"output", "dir"}};
  for (const auto& [section, key] : keys) {
    const std::string full = std::string(section) + "." + key;
    INFO(full);
    REQUIRE_THROWS_WITH(parse(with(fmt::format("[{}]\n{} = \"{}\"\n", section, key, nul))),
                        Contains(fmt::format("configs/x.toml:4: {}: ", full)) &&
                            Contains("NUL byte"));
    REQUIRE_THROWS_WITH(parse(kMinimal, {fmt::format("{}=\"{}\"", full, nul)}),
                        Contains(fmt::format("--set {}: {}: ", full, full)) &&
                            Contains("NUL byte"));
    REQUIRE_THROWS_AS(parse(kMinimal, {fmt::format("{}=\"{}\"", full, nul)}), UserError);
  }
}

TEST_CASE("config: a key of too many dotted parts is exit 2 before the TOML reader sees it",
          "[config]") {
  // The TOML reader recurses once per part of a dotted key or table header: 50,000 parts overflow
  // its stack (a crash, not an error). A config's keys have two (section.key).
  const auto dotted = [](int parts, const std::string& part = "a", const std::string& dot = ".") {
    std::string key = part;
    for (int i = 1; i < parts; ++i) key += dot + part;
    return key;
  };
  const std::string deep = dotted(50000);
  const auto refused = [](const std::string& where) {
    return Contains(where + ": a dotted key or table header of more than 16 parts");
  };
  REQUIRE_THROWS_WITH(parse(with(deep + " = 1\n")), refused("configs/x.toml:3"));
  REQUIRE_THROWS_WITH(parse(with("[" + deep + "]\n")), refused("configs/x.toml:3"));
  REQUIRE_THROWS_WITH(parse(with("[[" + deep + "]]\n")), refused("configs/x.toml:3"));
  REQUIRE_THROWS_WITH(parse(with(dotted(50000, "\"a\"", " . ") + " = 1\n")),
                      refused("configs/x.toml:3"));
  // In an inline table, after a multi-line string holding a line break.
  REQUIRE_THROWS_WITH(parse(with("[model]\nx = \"\"\"\n\"\"\"\ny = {" + deep + " = 1}\n")),
                      refused("configs/x.toml:6"));
  // A --set value is TOML too: an inline table, or a second line.
  REQUIRE_THROWS_WITH(parse(kMinimal, {"model.x={" + deep + " = 1}"}), refused("--set model.x"));
  REQUIRE_THROWS_WITH(parse(kMinimal, {"model.x=1\n" + deep + " = 1"}), refused("--set model.x"));
  // A --set key of many parts is refused as malformed, its echo bounded.
  std::string message;
  try {
    parse(kMinimal, {deep + "=1"});
  } catch (const UserError& e) {
    message = e.what();
  }
  CHECK_THAT(message, Contains("expected section.key=value"));
  CHECK(message.size() < 400);
  // 16 parts pass the guard (and are an unknown section); dots in strings, comments and numbers
  // are no parts.
  REQUIRE_THROWS_WITH(parse(with(dotted(16) + " = 1\n")), !Contains("more than 16 parts"));
  REQUIRE_THROWS_WITH(parse(with(dotted(17) + " = 1\n")), refused("configs/x.toml:3"));
  const std::string dots(1000, '.');
  std::string caps = "0.5";
  for (int i = 1; i < 100; ++i) caps += fmt::format(", {}.5", i);
  const Config ok = parse(with("# " + dots + "\n[output]\ndir = \"" + dots + "\"\n[bench]\n" +
                               "bucket_cap_mb = [" + caps + "]\n"),
                          {"output.dir='" + dots + "'"});
  CHECK(ok.output.dir == dots);
  // A bare --set string holds no key: its dots are a name's (a directory per sweep point).
  const std::string sweep = "runs/lr.1e-3.bs.64.wd.0.1.warm.100.clip.1.0.seed.1.2.3.4.5.6.7";
  CHECK(parse(kMinimal, {"output.dir=" + sweep}).output.dir == sweep);
  CHECK(ok.bench.bucket_cap_mb.size() == 100);
}

TEST_CASE("config: --set overrides apply before validation", "[config]") {
  SECTION("numbers, arrays, bare words, booleans, strings") {
    CHECK(parse(kMinimal, {"optimizer.lr=3e-4"}).optimizer.lr == 3e-4f);
    CHECK(parse(kMinimal, {"optimizer.lr=1"}).optimizer.lr == 1.0f);
    CHECK(parse(with("[optimizer]\nlr = 0.5\n"), {"optimizer.lr=0.25"}).optimizer.lr == 0.25f);
    CHECK(parse(kMinimal, {"model.widths=[784,512,10]"}).model.widths ==
          std::vector<std::int64_t>{784, 512, 10});
    const Config zero = parse(kMinimal, {"parallel.mode=zero", "parallel.overlap=interleaved"});
    CHECK(zero.parallel.mode == zl::ParallelMode::Zero);
    CHECK(zero.parallel.overlap == zl::Overlap::Interleaved);
    CHECK(parse(kMinimal, {"data.shuffle=false"}).data.shuffle == false);
    CHECK(parse(kMinimal, {"output.trace = true"}).output.trace == true);
    CHECK(parse(kMinimal, {"output.dir=\"runs/a b\""}).output.dir == "runs/a b");
    CHECK(parse(kMinimal, {"output.dir=runs/x=1"}).output.dir == "runs/x=1");
    CHECK(parse(kMinimal, {"link.latency_us=5"}).link.latency_us == 5.0);  // creates [link]
    CHECK(parse(kMinimal, {"bench.bucket_cap_mb=[1, 4.5]"}).bench.bucket_cap_mb ==
          std::vector<double>{1.0, 4.5});
    const Config resume = parse(kMinimal, {"checkpoint.resume=runs/x/step_10.safetensors"});
    CHECK(resume.checkpoint.resume);
    CHECK(resume.checkpoint.resume_path == "runs/x/step_10.safetensors");
    CHECK(parse(kMinimal, {"checkpoint.dir=ck", "checkpoint.resume=true"}).checkpoint.resume);
    // Later overrides win.
    CHECK(parse(kMinimal, {"optimizer.lr=0.1", "optimizer.lr=0.2"}).optimizer.lr == 0.2f);
  }
  SECTION("steps and epochs replace each other") {
    const Config steps = parse(with("[train]\nepochs = 3\n"), {"train.steps=100"});
    CHECK(steps.train.steps == 100);
    CHECK(steps.train.epochs == 0);
    const Config epochs = parse(with("[train]\nsteps = 300\n"), {"train.epochs=2"});
    CHECK(epochs.train.epochs == 2);
    CHECK(epochs.train.steps == 0);
    REQUIRE_THROWS_WITH(parse(kMinimal, {"train.steps=100", "train.epochs=2"}),
                        Contains("--set train.steps: train.steps: set either steps or epochs"));
  }
  SECTION("an integer bound holds exactly, beyond 2^53 too") {
    CHECK(parse(kMinimal, {"train.max_consecutive_skips=9007199254740992"})
              .train.max_consecutive_skips == (std::int64_t{1} << 53));
    // 2^53 + 1 rounds to 2^53 as a double: compared as an integer it is refused.
    REQUIRE_THROWS_WITH(parse(kMinimal, {"train.max_consecutive_skips=9007199254740993"}),
                        Contains("train.max_consecutive_skips: must be in [1, 9007199254740992] "
                                 "(got 9007199254740993)"));
  }
  SECTION("bad overrides are located at --set key") {
    // Digits TOML cannot hold as an integer are named as such, not taken for a string.
    REQUIRE_THROWS_WITH(parse(kMinimal, {"train.steps=99999999999999999999"}),
                        Contains("--set train.steps: 99999999999999999999 is beyond a 64-bit "
                                 "integer"));
    REQUIRE_THROWS_WITH(parse(kMinimal, {"train.steps=-9223372036854775809"}),
                        Contains("is beyond a 64-bit integer"));
    REQUIRE_THROWS_WITH(parse(kMinimal, {"train.steps=-9223372036854775809"}),
                        Contains("(at least -9223372036854775808)"));
    // So are those of a float beyond a double's range, whatever the key.
    for (const char* big : {"optimizer.lr=1e400", "optimizer.lr=-1.5E+309", "optimizer.lr=1_0e4_00"}) {
      INFO(big);
      REQUIRE_THROWS_WITH(parse(kMinimal, {big}),
                          StartsWith("--set optimizer.lr: ") && Contains("is beyond a 64-bit float"));
    }
    CHECK(parse(kMinimal, {"output.dir=1e3x"}).output.dir == "1e3x");  // no float: a bare string
    CHECK(parse(kMinimal, {"output.dir=2026-12-05_run"}).output.dir == "2026-12-05_run");
    CHECK(parse(kMinimal, {"output.dir=007"}).output.dir == "007");  // not TOML: a bare string
    CHECK(parse(kMinimal, {"output.dir=0123"}).output.dir == "0123");
    // A TOML integer, boolean or date where a string is expected: the message says how to quote.
    CHECK_THROWS_WITH(parse(kMinimal, {"output.dir=123"}),
                      Contains("expected a string, got integer (123); quote a string: --set "
                               "'output.dir=\"123\"'"));
    CHECK_THROWS_WITH(parse(kMinimal, {"output.dir=0x1F"}), Contains("'output.dir=\"0x1F\"'"));
    CHECK_THROWS_WITH(parse(kMinimal, {"output.dir=2024-01-01"}),
                      Contains("got date (date); quote a string: --set "
                               "'output.dir=\"2024-01-01\"'"));
    // A value that opens a TOML string, array or table but is no TOML value is refused: a
    // missing closing quote made a directory named '"/tmp/q1' before.
    for (const char* bad : {"output.dir=\"/tmp/q1", "output.dir=\"x\" junk", "output.dir='x",
                            "model.widths=[2, 8", "output.dir={a = 1"}) {
      INFO(bad);
      REQUIRE_THROWS_WITH(parse(kMinimal, {bad}), Contains("is not a TOML value"));
    }
    REQUIRE_THROWS_WITH(parse(kMinimal, {"output.dir=\"/tmp/q1"}),
                        StartsWith("--set output.dir: \"/tmp/q1 is not a TOML value ("));
    REQUIRE_THROWS_WITH(parse(kMinimal, {"optimizer.lr=-1"}),
                        "--set optimizer.lr: optimizer.lr: must be > 0 (got -1)");
    REQUIRE_THROWS_WITH(parse(kMinimal, {"optimizer.lrr=1"}),
                        "--set optimizer.lrr: unknown key 'optimizer.lrr' (did you mean 'lr'?)");
    REQUIRE_THROWS_WITH(parse(kMinimal, {"optimiser.lr=1"}),
                        "--set optimiser.lr: unknown section [optimiser] (did you mean "
                        "[optimizer]?)");
    REQUIRE_THROWS_WITH(parse(kMinimal, {"model.widths=abc"}),
                        "--set model.widths: model.widths: expected an array of integers, got "
                        "string");
    REQUIRE_THROWS_WITH(parse(kMinimal, {"model.widths=[784, 1.5, 10]"}),
                        "--set model.widths: model.widths: expected an array of integers, got "
                        "float at index 1");
    REQUIRE_THROWS_WITH(parse(kMinimal, {"parallel.overlap=sometimes"}),
                        Contains("--set parallel.overlap: parallel.overlap: expected one of"));
    // A bare string must be text a TOML file can hold: the canonical config.toml written from
    // it must read back (the config fuzzer found a path with a 0xFF byte that did not).
    REQUIRE_THROWS_WITH(parse(kMinimal, {"checkpoint.dir=runs/\xff\xfe"}),
                        "--set checkpoint.dir: the value is not valid UTF-8 (TOML text is UTF-8)");
    REQUIRE_THROWS_WITH(parse(kMinimal, {"output.dir=a\xc0\xaf" "b"}),  // overlong '/'
                        Contains("--set output.dir: the value is not valid UTF-8"));
    CHECK(parse(kMinimal, {"output.dir=runs/\xc3\xa9t\xc3\xa9"}).output.dir ==
          "runs/\xc3\xa9t\xc3\xa9");
    REQUIRE_THROWS_WITH(parse(kMinimal, {"data.batch_size=1.5"}),
                        "--set data.batch_size: data.batch_size: expected an integer, got float "
                        "(1.5)");
    // The cross-key check sees the override: ddp from the file, overlap from --set.
    REQUIRE_THROWS_WITH(parse(kMinimal, {"parallel.overlap=after_backward"}),
                        Contains("--set parallel.overlap: parallel.overlap: \"after_backward\" "
                                 "applies to mode = \"zero\" only"));
    REQUIRE_THROWS_WITH(parse(kMinimal, {"parallel.collective=reduce_broadcast"}),
                        Contains("--set parallel.collective: parallel.collective: "
                                 "\"reduce_broadcast\" applies to mode = \"zero\" only"));
    REQUIRE_THROWS_WITH(parse(with("[train]\nclip_grad_norm = 1.0\n"),
                              {"parallel.mode=zero", "parallel.overlap=interleaved"}),
                        Contains("(at configs/x.toml:4)"));
    // A shard group needs element shards: with ddp, and with a bucket collective. The message
    // names the key, then its value.
    REQUIRE_THROWS_WITH(parse(kMinimal, {"parallel.shard_group=2"}),
                        Contains("--set parallel.shard_group: parallel.shard_group: 2 splits "
                                 "every bucket's element shards over groups of 2 ranks, which "
                                 "needs parallel.mode = \"zero\" and parallel.collective = "
                                 "\"reduce_scatter_allgather\" (got mode = \"ddp\" by "
                                 "default, collective = \"allreduce_broadcast\" by default)"));
    REQUIRE_THROWS_WITH(parse(kMinimal, {"parallel.mode=zero", "parallel.shard_group=2",
                                         "parallel.collective=reduce_broadcast"}),
                        Contains("(got mode = \"zero\" at --set parallel.mode, collective = "
                                 "\"reduce_broadcast\" at --set parallel.collective)"));
    CHECK(parse(kMinimal, {"parallel.mode=zero", "parallel.shard_group=2",
                           "parallel.collective=reduce_scatter_allgather"})
              .parallel.shard_group == 2);
  }
  SECTION("malformed overrides are named") {
    REQUIRE_THROWS_WITH(parse(kMinimal, {"optimizer.lr"}),
                        "--set 'optimizer.lr': expected section.key=value (e.g. --set "
                        "optimizer.lr=3e-4)");
    REQUIRE_THROWS_WITH(parse(kMinimal, {"lr=1"}), Contains("--set 'lr=1': expected section.key"));
    REQUIRE_THROWS_WITH(parse(kMinimal, {".lr=1"}), Contains("--set '.lr=1'"));
    REQUIRE_THROWS_WITH(parse(kMinimal, {"a.b.c=1"}), Contains("--set 'a.b.c=1'"));
    REQUIRE_THROWS_WITH(parse("model = 3\n", {"model.widths=[1]"}),
                        Contains("--set model.widths: 'model' is not a section"));
  }
}

TEST_CASE("config: a link.ranks study of a shard group needs two real groups", "[config]") {
  // The study models more replicas of real groups; the replicas' all-reduce runs between real
  // groups, so with one group it would be left out of the timing.
  const std::string hybrid = kMinimal +
                             "[parallel]\nmode = \"zero\"\ncollective = "
                             "\"reduce_scatter_allgather\"\n[link]\nbandwidth_gbps = 100\n";
  const auto check = [&](const std::vector<std::string>& overrides, int world) {
    zl::check_shard_group(parse(hybrid, overrides), world);
  };
  REQUIRE_THROWS_WITH(check({"parallel.shard_group=4", "link.ranks=8"}, 4),
                      Contains("parallel.shard_group = 4 is every rank of this job") &&
                          Contains("link.ranks = 8") && Contains("shard_group = 0"));
  CHECK_NOTHROW(check({"parallel.shard_group=2", "link.ranks=8"}, 4));
  CHECK_NOTHROW(check({"parallel.shard_group=4"}, 4));
  REQUIRE_THROWS_WITH(check({"parallel.shard_group=2", "link.ranks=7"}, 4),
                      Contains("link.ranks: 7 is not a multiple of parallel.shard_group = 2"));
}

TEST_CASE("config: link.ranks with a shard group is a multiple of the group, at any world size",
          "[config]") {
  // Below the world size too: link.ranks = 3 on 4 ranks in groups of 2 is a config error naming
  // both keys. The model times link.ranks / G replicas of the groups of G (docs/config.md,
  // [link] ranks), whatever the world.
  const std::string hybrid = kMinimal +
                             "[parallel]\nmode = \"zero\"\ncollective = "
                             "\"reduce_scatter_allgather\"\n[link]\nbandwidth_gbps = 10\n";
  const auto check = [&](int group, int ranks, int world) {
    zl::check_shard_group(parse(hybrid, {fmt::format("parallel.shard_group={}", group),
                                         fmt::format("link.ranks={}", ranks)}),
                          world);
  };
  for (const auto& [group, ranks, world] :
       std::vector<std::tuple<int, int, int>>{{2, 3, 4}, {2, 1, 4}, {3, 4, 6}, {2, 5, 4}}) {
    DYNAMIC_SECTION("groups of " << group << ", link.ranks = " << ranks << ", " << world
                                 << " ranks") {
      REQUIRE_THROWS_AS(check(group, ranks, world), zl::UserError);
      REQUIRE_THROWS_WITH(
          check(group, ranks, world),
          StartsWith(fmt::format("--set link.ranks: link.ranks: {} is not a multiple of "
                                 "parallel.shard_group = {} (at --set parallel.shard_group)",
                                 ranks, group)));
    }
  }
  CHECK_NOTHROW(check(2, 2, 4));  // one modelled group: no replicas to time
  CHECK_NOTHROW(check(3, 3, 6));
  CHECK_NOTHROW(check(2, 8, 4));
  // Without a shard group any link.ranks is a flat job of that many ranks.
  CHECK_NOTHROW(zl::check_shard_group(parse(hybrid, {"link.ranks=3"}), 4));
}

// A check that runs after parsing (it needs the world size) names where its key was set, as the
// parser's own messages do: the --set flag, else the key's line, else its section's, else the file.
TEST_CASE("config: checks after parsing name the flag or line that set the key", "[config]") {
  const std::string sharded = kMinimal +  // lines 1-2, then [parallel] on lines 3-5
                              "[parallel]\nmode = \"zero\"\ncollective = "
                              "\"reduce_scatter_allgather\"\n";
  REQUIRE_THROWS_WITH(zl::check_shard_group(parse(sharded + "shard_group = 3\n"), 4),
                      StartsWith("configs/x.toml:6: parallel.shard_group = 3 does not divide"));
  // The check serves `zerolap plan --world N` too: the world it names is not always this job's.
  REQUIRE_THROWS_WITH(zl::check_shard_group(parse(sharded + "shard_group = 3\n"), 4),
                      Contains("does not divide the world of 4 ranks") && !Contains("this job"));
  REQUIRE_THROWS_WITH(zl::check_shard_group(parse(sharded, {"parallel.shard_group=3"}), 4),
                      StartsWith("--set parallel.shard_group: parallel.shard_group = 3"));

  // A global batch with train.grad_accum: refused at any world size, so when the config is read
  // (`zerolap config` took it; only a run refused it).
  const std::string both = kMinimal + "[data]\nglobal_batch_size = 64\n[train]\ngrad_accum = 2\n";
  REQUIRE_THROWS_WITH(parse(both), StartsWith("configs/x.toml:6: train.grad_accum: 2 with "
                                              "data.global_batch_size = 64 set"));
  REQUIRE_THROWS_WITH(parse(kMinimal, {"data.global_batch_size=64", "train.grad_accum=2"}),
                      StartsWith("--set train.grad_accum: train.grad_accum: 2 with"));

  const Config defaults = parse(kMinimal + "[train]\nsteps = 5\n");
  CHECK(zl::where_set(defaults, "train.steps") == "configs/x.toml:4");
  CHECK(zl::where_set(defaults, "train.log_every") == "configs/x.toml:3");  // the section's line
  CHECK(zl::where_set(defaults, "link.ranks") == "configs/x.toml");         // no [link]: the file
  CHECK(zl::where_set(Config{}, "link.ranks").empty());  // a Config built in code has no source
}

TEST_CASE("config: to_toml round-trips through parse_config", "[config]") {
  SECTION("every key, defaults") {
    for (const std::string& text : {kEveryKey, kMinimal}) {
      const Config c = parse(text);
      const std::string canonical = zl::to_toml(c);
      const Config back = zl::parse_config(canonical, "canonical.toml");
      CHECK(zl::to_toml(back) == canonical);
      CHECK(back.model.widths == c.model.widths);
      CHECK(back.optimizer.lr == c.optimizer.lr);
      CHECK(back.optimizer.beta2 == c.optimizer.beta2);
      CHECK(back.checkpoint.resume_path == c.checkpoint.resume_path);
      CHECK(back.bench.bucket_cap_mb == c.bench.bucket_cap_mb);
      CHECK(back.train.epochs == c.train.epochs);
    }
  }
  SECTION("canonical text is readable: shortest floats, every section") {
    const std::string text = zl::to_toml(parse(kMinimal));
    CHECK_THAT(text, Contains("lr = 0.001\n"));
    CHECK_THAT(text, Contains("betas = [0.9, 0.999]\n"));
    CHECK_THAT(text, Contains("bucket_cap_mb = 25.0\n"));
    CHECK_THAT(text, Contains("widths = [784, 10]\n"));
    CHECK_THAT(text, Contains("resume = false\n"));
    CHECK_THAT(text, Contains("threads = \"auto\"\n"));
    for (const char* section : {"[model]", "[data]", "[optimizer]", "[parallel]", "[precision]", "[train]",
                                "[checkpoint]", "[runtime]", "[bench]", "[link]", "[output]"}) {
      CHECK_THAT(text, Contains(section));
    }
    CHECK_THAT(text, !Contains("configs/x.toml"));  // the source path is not part of the run
  }
  SECTION("floats of any magnitude come back bit-exact") {
    std::mt19937_64 rng(1234);
    std::uniform_real_distribution<double> exponent(-30.0, 3.0);
    for (int i = 0; i < 2000; ++i) {
      Config c = parse(kMinimal);
      c.optimizer.lr = static_cast<float>(std::pow(10.0, exponent(rng)));
      c.optimizer.min_lr = c.optimizer.lr * 0.37f;
      c.parallel.bucket_cap_mb = std::pow(10.0, exponent(rng));
      c.link.latency_us = std::pow(10.0, exponent(rng));
      const Config back = zl::parse_config(zl::to_toml(c), "r.toml");
      REQUIRE(back.optimizer.lr == c.optimizer.lr);
      REQUIRE(back.optimizer.min_lr == c.optimizer.min_lr);
      REQUIRE(back.parallel.bucket_cap_mb == c.parallel.bucket_cap_mb);
      REQUIRE(back.link.latency_us == c.link.latency_us);
    }
  }
  SECTION("strings that need escaping") {
    Config c = parse(kMinimal);
    c.output.dir = "runs/\"quoted\" \\ back\nnew\ttab \x01 é";
    c.checkpoint.dir = "ck";
    c.checkpoint.resume = true;
    const Config back = zl::parse_config(zl::to_toml(c), "r.toml");
    CHECK(back.output.dir == c.output.dir);
    CHECK(back.checkpoint.resume == true);
    CHECK(back.checkpoint.resume_path.empty());
  }
}

TEST_CASE("config: result_differences names the keys whose values differ", "[config]") {
  const std::string a = "[model]\nwidths = [1, 2]\n\n[parallel]\nmode = \"ddp\"\n";
  const std::string b = "[model]\nwidths = [1, 2]\n\n[parallel]\nmode = \"zero\"\nx = 1\n";
  CHECK(zl::result_differences(a, b) == std::vector<std::string>{"parallel.mode", "parallel.x"});
  CHECK(zl::result_differences(a, a).empty());
}

TEST_CASE("config: config_hash is stable and follows the values", "[config]") {
  const Config c = parse(kEveryKey);
  const std::string h = zl::config_hash(c);
  REQUIRE(h.size() == 16);
  CHECK(h.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(zl::config_hash(c) == h);
  CHECK(zl::config_hash(zl::parse_config(zl::to_toml(c), "other.toml")) == h);

  // FNV-1a 64 of the canonical text, each line with its newline, without the keys of
  // [checkpoint] and [output], runtime.timeout_s, runtime.comm_priority and
  // runtime.memory_limit_mb.
  std::uint64_t fnv = 14695981039346656037ull;
  std::istringstream lines(zl::to_toml(c));
  std::string line, section;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '[') section = line;
    const bool skipped = !line.empty() && line[0] != '[' &&
                         (section == "[checkpoint]" || section == "[output]" ||
                          line.rfind("timeout_s = ", 0) == 0 || line.rfind("comm_priority = ", 0) == 0 ||
                          line.rfind("memory_limit_mb = ", 0) == 0);
    if (skipped) continue;
    for (const unsigned char ch : line + "\n") fnv = (fnv ^ ch) * 1099511628211ull;
  }
  char expected[17];
  std::snprintf(expected, sizeof expected, "%016llx", static_cast<unsigned long long>(fnv));
  CHECK(h == expected);

  // Spelling does not matter (comments, order, 1 vs 1.0, inline table); values do.
  const Config a = parse("# a comment\n[optimizer]\nlr = 1\n[model]\nwidths = [784, 10]\n");
  const Config b = zl::parse_config("model = { widths = [784, 10] }\noptimizer = { lr = 1.0 }\n",
                                    "elsewhere.toml");
  CHECK(zl::config_hash(a) == zl::config_hash(b));
  Config changed = a;
  changed.optimizer.lr = 0.5f;
  CHECK(zl::config_hash(changed) != zl::config_hash(a));
  changed = a;
  changed.bench.modes = {"ddp"};
  CHECK(zl::config_hash(changed) != zl::config_hash(a));
  // Where the run writes and whether it resumes do not.
  changed = a;
  changed.checkpoint.resume = true;
  changed.checkpoint.dir = "elsewhere";
  changed.output.dir = "runs/other";
  CHECK(zl::config_hash(changed) == zl::config_hash(a));
  CHECK_FALSE(zl::key_affects_results("checkpoint.dir"));
  CHECK_FALSE(zl::key_affects_results("output.trace"));
  CHECK(zl::key_affects_results("runtime.threads"));
  // Nor how long it waits for a peer, or how its comm threads are scheduled.
  changed = a;
  changed.runtime.timeout_s = 5.0;
  changed.runtime.comm_priority = zl::CommPriority::Realtime;
  changed.runtime.memory_limit_mb = 1024;  // nor against which memory it was checked
  CHECK(zl::config_hash(changed) == zl::config_hash(a));
}

TEST_CASE("config: load_config reads files and names missing ones", "[config]") {
  REQUIRE_THROWS_WITH(zl::load_config("/nonexistent/x.toml"),
                      "cannot read config file '/nonexistent/x.toml': No such file or directory");
  REQUIRE_THROWS_AS(zl::load_config("/nonexistent/x.toml"), UserError);
  REQUIRE_THROWS_WITH(zl::load_config("/tmp"),
                      Contains("config file '/tmp' is not a regular file (it is a directory)"));
  // A device is refused before it is read (/dev/zero would be read forever).
  REQUIRE_THROWS_WITH(zl::load_config("/dev/zero"),
                      Contains("config file '/dev/zero' is not a regular file (it is a character "
                               "device)"));

  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zerolap_test_config";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "run.toml").string();
  {
    std::ofstream out(path);
    out << kMinimal << "[optimizer]\nlr = -2\n";
  }
  REQUIRE_THROWS_WITH(zl::load_config(path), path + ":4: optimizer.lr: must be > 0 (got -2)");
  const Config c = zl::load_config(path, {"optimizer.lr=0.01"});
  CHECK(c.source_path == path);
  CHECK(c.optimizer.lr == 0.01f);
  const std::string big = (dir / "big.toml").string();
  {
    std::ofstream out(big);
    out << kMinimal << std::string(std::size_t{2} << 20, '#') << "\n";  // a 2 MiB comment
  }
  REQUIRE_THROWS_WITH(zl::load_config(big),
                      Contains("config file '" + big + "' is larger than 1048576 bytes"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("config: the shipped configs parse", "[config]") {
  const std::string root = ZEROLAP_SOURCE_DIR;
  const Config fmnist = zl::load_config(root + "/configs/fashion_mnist_mlp.toml");
  CHECK(fmnist.model.widths == std::vector<std::int64_t>{784, 256, 256, 10});
  CHECK(fmnist.model.activation == zl::Activation::Relu);
  CHECK(fmnist.data.kind == zl::DataKind::FashionMnist);
  CHECK(fmnist.data.path == "/usr/share/datasets/fashion-mnist");
  CHECK(fmnist.data.batch_size == 64);
  CHECK(fmnist.optimizer.kind == zl::OptimizerKind::Adam);
  CHECK(fmnist.optimizer.lr == 2e-3f);
  CHECK(fmnist.optimizer.schedule == zl::LrSchedule::Cosine);
  CHECK(fmnist.train.epochs == 3);
  CHECK(fmnist.train.steps == 0);
  CHECK(fmnist.train.log_every == 100);
  CHECK(fmnist.train.eval_every == 0);
  CHECK(fmnist.parallel.mode == zl::ParallelMode::Ddp);
  CHECK(fmnist.output.dir == "runs/fashion_mnist_mlp");

  const Config spirals = zl::load_config(root + "/configs/spirals.toml");
  CHECK(spirals.data.kind == zl::DataKind::Spirals);
  CHECK(spirals.model.widths.front() == 2);
  CHECK(spirals.model.widths.back() == 3);
  CHECK(spirals.optimizer.lr == 1e-2f);
  CHECK(spirals.data.batch_size == 32);
  CHECK(spirals.train.steps > 0);
}

TEST_CASE("a config's unknown names and bad strings are echoed as bounded, escaped excerpts",
          "[config]") {
  // 100 kB names and values with control bytes (TOML escapes), in each message that echoes them.
  const std::string odd = "\\u001b[2J\\n" + std::string(100000, 'n');
  const std::vector<std::string> texts = {
      "[model]\n\"" + odd + "\" = 1\n",                      // unknown key
      "\"" + odd + "\" = 1\n",                               // unknown top-level key
      "[\"" + odd + "\"]\nx = 1\n",                          // unknown section
      "[model]\nactivation = \"" + odd + "\"\n",             // not one of the names
      "[model]\nwidths = \"" + odd + "\"\n",                 // wrong type, the value shown
      "[bench]\nmodes = [\"" + odd + "\"]\n",                // unknown bench mode
  };
  for (const std::string& text : texts) {
    std::string message;
    try {
      zl::parse_config(text, "x.toml", {});
    } catch (const zl::UserError& e) {
      message = e.what();
    }
    zl::test::check_bounded_escaped(message);
  }
}
