// ShardedOptimizer: LR schedule, per-bucket state ownership and the fused bucket step.
#include "runtime/train/sharded_optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>

#include "base/errors.h"
#include "kernels/optimizer_kernels.h"

namespace zl {

float scheduled_lr(const OptimizerConfig& config, std::int64_t t, std::int64_t total_steps) {
  const double base = config.lr;
  if (config.warmup_steps > 0 && t <= config.warmup_steps) {
    return static_cast<float>(base * static_cast<double>(t) / config.warmup_steps);
  }
  if (config.schedule == LrSchedule::Constant) return static_cast<float>(base);
  const std::int64_t decay_steps = total_steps - config.warmup_steps;
  if (decay_steps <= 0) return static_cast<float>(base);
  // As torch's CosineAnnealingLR: the first decay step runs at lr and step t at progress
  // (t - 1)/T, so the last step still moves the parameters; min_lr is reached after it.
  const double progress = std::clamp(
      static_cast<double>(t - config.warmup_steps - 1) / static_cast<double>(decay_steps), 0.0,
      1.0);
  const double min_lr = config.min_lr;
  return static_cast<float>(min_lr +
                            0.5 * (base - min_lr) * (1.0 + std::cos(std::numbers::pi * progress)));
}

ShardedOptimizer::ShardedOptimizer(const OptimizerConfig& config, const BucketPlan& plan,
                                   ParameterStore& store, int rank, const ModePlan& mode,
                                   std::int64_t total_steps)
    : config_(config), plan_(plan), store_(store), total_steps_(total_steps) {
  if (config.kind == OptimizerKind::Sgd) {
    if (config.momentum != 0.0f) state_names_ = {"momentum_buffer"};
  } else {
    state_names_ = {"exp_avg", "exp_avg_sq"};
  }
  state_.resize(plan.buckets.size());
  for (const auto& b : plan.buckets) {
    if (!mode.steps_on(b, rank)) continue;
    auto& buffers = state_[static_cast<std::size_t>(b.index)];
    for (std::size_t i = 0; i < state_names_.size(); ++i) {
      buffers.emplace_back(store.device(), b.numel);
    }
    // An owned bucket with no state (plain SGD) still needs to read as owned.
    if (buffers.empty()) buffers.emplace_back();
  }
}

StepScalars ShardedOptimizer::next_step(float grad_scale) {
  ++t_;
  return StepScalars{t_, scheduled_lr(config_, t_, total_steps_), grad_scale};
}

void ShardedOptimizer::step_bucket(int bucket, const StepScalars& s, const ExecContext& exec) {
  const auto start = std::chrono::steady_clock::now();
  const Bucket& b = plan_.buckets.at(static_cast<std::size_t>(bucket));
  auto& buffers = state_[static_cast<std::size_t>(bucket)];
  ZL_CHECK(!buffers.empty(), "bucket {} stepped on a rank that does not own it", bucket);
  float* p = store_.data() + b.offset;
  const float* g = store_.grad() + b.offset;
  switch (config_.kind) {
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW: {
      AdamHyper h{config_.lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay,
                  config_.kind == OptimizerKind::AdamW};
      adam_step(exec, p, g, buffers[0].data(), buffers[1].data(), b.numel,
                make_adam_step(h, s.lr, s.t, s.grad_scale));
      break;
    }
    case OptimizerKind::Sgd: {
      SgdHyper h{config_.lr, config_.momentum, config_.dampening, config_.weight_decay,
                 config_.nesterov};
      float* buf = config_.momentum != 0.0f ? buffers[0].data() : nullptr;
      sgd_step(exec, p, g, buf, b.numel, make_sgd_step(h, s.lr, s.t, s.grad_scale));
      break;
    }
  }
  optimizer_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
}

float* ShardedOptimizer::param_state(int param_id, int which) {
  const int bucket = plan_.bucket_of_param.at(static_cast<std::size_t>(param_id));
  auto& buffers = state_[static_cast<std::size_t>(bucket)];
  if (buffers.empty() || which < 0 || which >= static_cast<int>(state_names_.size())) return nullptr;
  const std::int64_t within = store_.info(param_id).offset - plan_.buckets[bucket].offset;
  return buffers[static_cast<std::size_t>(which)].data() + within;
}

std::int64_t ShardedOptimizer::state_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& buffers : state_) {
    for (const auto& buf : buffers) bytes += buf.size() * static_cast<std::int64_t>(sizeof(float));
  }
  return bytes;
}

}  // namespace zl
