// RankOptimizer with bf16 parameters: each stepped bucket's masters (fp32 or int16 remainders)
// start exactly at the fp32 initial values, take ModePlan::master_bytes, follow the fused bf16 step
// and write the bf16 parameter into the store; read_master / write_master round-trip and refuse a
// parameter this rank does not step; fp32 masters and remainders give bitwise-equal runs.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "base/bf16.h"
#include "base/errors.h"
#include "kernels/optimizer_kernels.h"
#include "models/model.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/mode_plan.h"
#include "runtime/train/step/rank_optimizer.h"

using namespace zl;

namespace {

Model bf16_model() {
  ModelSpec spec;
  spec.widths = {4, 16, 16, 3};
  spec.seed = 7;
  spec.dtype = DType::BF16;
  return Model(spec, DeviceKind::Cpu);
}

ModePlan bf16_mode(ParallelMode mode, MasterWeights master, const OptimizerConfig& optimizer) {
  ParallelConfig parallel;
  parallel.mode = mode;
  PrecisionConfig precision;
  precision.compute = ComputePrecision::Bf16;
  precision.master_weights = master;
  return make_mode_plan(parallel, optimizer, precision);
}

// Bucket caps small enough for one layer per bucket: several buckets, spread over ranks.
BucketPlan plan_for(const ParameterStore& store, int world) {
  return build_bucket_plan(store, 1e-7, 1e-7, world, AssignmentPolicy::RoundRobin);
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> master_of(const RankOptimizer& opt, const ParameterStore& store, int id) {
  std::vector<float> out(static_cast<std::size_t>(store.info(id).numel));
  opt.read_master(id, out.data());
  return out;
}

// Random gradients (padding stays zero, as backward leaves it).
void fill_gradients(ParameterStore& store, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (const ParameterInfo& p : store.parameters()) {
    for (std::int64_t i = 0; i < p.numel; ++i) store.grad()[p.offset + i] = normal(rng);
  }
}

}  // namespace

TEST_CASE("bf16 masters start at the fp32 initial values and take ModePlan::master_bytes",
          "[optimizer][masters]") {
  OptimizerConfig adam;
  for (const MasterWeights master : {MasterWeights::Fp32, MasterWeights::Remainders}) {
    for (const ParallelMode mode : {ParallelMode::Ddp, ParallelMode::Zero}) {
      for (int world = 1; world <= 3; ++world) {
        for (int rank = 0; rank < world; ++rank) {
          INFO("remainders " << (master == MasterWeights::Remainders) << " zero "
                             << (mode == ParallelMode::Zero) << " world " << world << " rank "
                             << rank);
          Model model = bf16_model();
          ParameterStore& store = model.store();
          const std::vector<float> init = model.initial_parameters();
          const BucketPlan plan = plan_for(store, world);
          REQUIRE(plan.buckets.size() > 2);
          const ModePlan mode_plan = bf16_mode(mode, master, adam);
          RankOptimizer opt(adam, plan, store, rank, mode_plan, 10, model.initial_values());
          CHECK(opt.has_masters());
          CHECK(opt.master_bytes() == mode_plan.master_bytes(plan, rank));
          CHECK(opt.master_bytes() > 0);
          for (const ParameterInfo& p : store.parameters()) {
            const int id = store.find(p.name);
            const Bucket& b = plan.buckets[static_cast<std::size_t>(plan.bucket_of_param[id])];
            if (!mode_plan.steps_on(b, rank)) {
              std::vector<float> out(static_cast<std::size_t>(p.numel));
              CHECK_THROWS_AS(opt.read_master(id, out.data()), InternalError);
              continue;
            }
            const std::vector<float> expected(init.begin() + p.offset,
                                              init.begin() + p.offset + p.numel);
            CHECK(bits_equal(master_of(opt, store, id), expected));
            for (std::int64_t i = 0; i < p.numel; ++i) {
              CHECK(store.param_as<Bf16>(id)[i].bits == master_to_bf16(expected[i]).bits);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("an fp32 store has no masters: read_master reads the parameter", "[optimizer][masters]") {
  ModelSpec spec;
  spec.widths = {4, 8, 3};
  Model model(spec, DeviceKind::Cpu);
  const BucketPlan plan = plan_for(model.store(), 1);
  const OptimizerConfig adam;
  const ModePlan mode = make_mode_plan(ParallelConfig{}, adam);
  RankOptimizer opt(adam, plan, model.store(), 0, mode, 10);
  CHECK_FALSE(opt.has_masters());
  CHECK(opt.master_bytes() == 0);
  CHECK(mode.master_bytes(plan, 0) == 0);
  const std::vector<float> values = {1.5f, -2.0f, 0.25f};  // layers.1.bias has 3 elements
  const int id = model.store().find("layers.1.bias");
  opt.write_master(id, values.data());
  CHECK(bits_equal(master_of(opt, model.store(), id), values));
  CHECK(model.store().param_data(id)[2] == 0.25f);
}

TEST_CASE("bf16 steps: masters follow the fused kernel, remainders are bitwise fp32 masters",
          "[optimizer][masters]") {
  OptimizerConfig adam;
  adam.kind = OptimizerKind::AdamW;
  adam.lr = 0.01f;
  adam.weight_decay = 0.1f;
  OptimizerConfig sgd;
  sgd.kind = OptimizerKind::Sgd;
  sgd.lr = 0.1f;
  sgd.momentum = 0.9f;
  OptimizerConfig plain_sgd = sgd;
  plain_sgd.momentum = 0.0f;
  for (const OptimizerConfig& config : {adam, sgd, plain_sgd}) {
    INFO("optimizer kind " << static_cast<int>(config.kind) << " momentum " << config.momentum);
    Model fp32_model = bf16_model(), rem_model = bf16_model(), ref_model = bf16_model();
    const std::vector<float> init = fp32_model.initial_parameters();
    const BucketPlan plan = plan_for(fp32_model.store(), 1);
    const ModePlan fp32_mode = bf16_mode(ParallelMode::Ddp, MasterWeights::Fp32, config);
    const ModePlan rem_mode = bf16_mode(ParallelMode::Ddp, MasterWeights::Remainders, config);
    RankOptimizer fp32_opt(config, plan, fp32_model.store(), 0, fp32_mode, 5,
                           fp32_model.initial_values());
    RankOptimizer rem_opt(config, plan, rem_model.store(), 0, rem_mode, 5,
                          fp32_model.initial_values());
    // The reference: the fused kernel called directly on a copy of the masters and state.
    std::vector<float> ref_master = init;
    std::vector<float> ref_m(init.size(), 0.0f), ref_v(init.size(), 0.0f);
    ParameterStore& ref = ref_model.store();
    const ExecContext cpu;
    for (int step = 1; step <= 5; ++step) {
      for (ParameterStore* store : {&fp32_model.store(), &rem_model.store(), &ref}) {
        fill_gradients(*store, 100u + static_cast<std::uint32_t>(step));
      }
      const StepScalars s = fp32_opt.next_step(0.5f);
      rem_opt.next_step(0.5f);
      for (const Bucket& b : plan.buckets) {
        const BucketGradient fp32_grads{fp32_model.store().grad() + b.offset, DType::F32};
        fp32_opt.step_bucket(b.index, s, cpu, fp32_grads);
        // Bf16 gradients too (reduce_dtype = "bf16"): the remainder run reads the rounded ones;
        // so does the reference for this bucket.
        std::vector<Bf16> g16(static_cast<std::size_t>(b.numel));
        const float* g32 = rem_model.store().grad() + b.offset;
        for (std::int64_t i = 0; i < b.numel; ++i) g16[i] = float_to_bf16(g32[i]);
        const bool bf16_grad = b.index % 2 == 1;
        if (bf16_grad) {
          rem_opt.step_bucket(b.index, s, cpu, BucketGradient{g16.data(), DType::BF16});
        } else {
          rem_opt.step_bucket(b.index, s, cpu, BucketGradient{g32, DType::F32});
        }
        Bf16OptimizerSlice slice;
        slice.grad = bf16_grad ? static_cast<const void*>(g16.data()) : ref.grad() + b.offset;
        slice.grad_dtype = bf16_grad ? DType::BF16 : DType::F32;
        slice.param = ref.params_as<Bf16>() + b.offset;
        slice.master = ref_master.data() + b.offset;
        slice.m = config.kind == OptimizerKind::Sgd && config.momentum == 0.0f
                      ? nullptr
                      : ref_m.data() + b.offset;
        slice.v = ref_v.data() + b.offset;
        if (config.kind == OptimizerKind::Sgd) {
          sgd_step_bf16_cpu(slice, b.numel,
                            make_sgd_step(SgdHyper{config.lr, config.momentum, config.dampening,
                                                   config.weight_decay, config.nesterov},
                                          s.lr, s.t, s.grad_scale));
        } else {
          adam_step_bf16_cpu(slice, b.numel,
                             make_adam_step(AdamHyper{config.lr, config.beta1, config.beta2,
                                                      config.eps, config.weight_decay, true},
                                            s.lr, s.t, s.grad_scale));
        }
      }
    }
    // The remainder run read bf16 gradients on odd buckets: compare it with the reference, and
    // the fp32-master run (all fp32 gradients) with the reference on the even buckets.
    for (const ParameterInfo& p : ref.parameters()) {
      const int id = ref.find(p.name);
      const std::vector<float> expected(ref_master.begin() + p.offset,
                                        ref_master.begin() + p.offset + p.numel);
      CHECK(bits_equal(master_of(rem_opt, rem_model.store(), id), expected));
      CHECK(std::memcmp(rem_model.store().param_as<Bf16>(id), ref.param_as<Bf16>(id),
                        static_cast<std::size_t>(p.numel) * sizeof(Bf16)) == 0);
      if (plan.bucket_of_param[id] % 2 == 0) {
        CHECK(bits_equal(master_of(fp32_opt, fp32_model.store(), id), expected));
      }
    }
    CHECK_FALSE(bits_equal(master_of(rem_opt, rem_model.store(), 0),
                           std::vector<float>(init.begin() + ref.info(0).offset,
                                              init.begin() + ref.info(0).offset +
                                                  ref.info(0).numel)));  // it moved
  }
}

TEST_CASE("write_master sets master and bf16 parameter; remainders reconstruct it exactly",
          "[optimizer][masters]") {
  const OptimizerConfig adam;
  for (const MasterWeights master : {MasterWeights::Fp32, MasterWeights::Remainders}) {
    Model model = bf16_model();
    const BucketPlan plan = plan_for(model.store(), 2);
    const ModePlan mode = bf16_mode(ParallelMode::Zero, master, adam);
    RankOptimizer opt(adam, plan, model.store(), 1, mode, 10, model.initial_values());
    for (const ParameterInfo& p : model.store().parameters()) {
      const int id = model.store().find(p.name);
      const Bucket& b = plan.buckets[static_cast<std::size_t>(plan.bucket_of_param[id])];
      std::vector<float> values(static_cast<std::size_t>(p.numel));
      // Values that are not bf16-representable, halfway cases and a negative zero.
      for (std::size_t i = 0; i < values.size(); ++i) {
        values[i] = bits_float(0x3F808000u + static_cast<std::uint32_t>(i) * 0x1235u) *
                    (i % 2 == 0 ? 1.0f : -1.0f);
      }
      values[0] = -0.0f;
      if (!mode.steps_on(b, 1)) {
        CHECK_THROWS_AS(opt.write_master(id, values.data()), InternalError);
        continue;
      }
      opt.write_master(id, values.data());
      CHECK(bits_equal(master_of(opt, model.store(), id), values));
      for (std::size_t i = 0; i < values.size(); ++i) {
        CHECK(model.store().param_as<Bf16>(id)[i].bits == master_to_bf16(values[i]).bits);
      }
    }
  }
}
