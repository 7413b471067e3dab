// RankOptimizer: LR schedule, per-bucket state and master ownership, the fused bucket step.
#include "runtime/train/step/rank_optimizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/bf16.h"
#include "base/errors.h"
#include "kernels/optimizer_kernels.h"
#include "runtime/train/step/parameter_gather.h"

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

namespace {

// The remainders live in a 2-byte DeviceBuffer (there is no int16 DType): its bits are int16.
std::int16_t* remainders_of(const DeviceBuffer& buf) {
  return static_cast<std::int16_t*>(buf.raw());
}

}  // namespace

RankOptimizer::RankOptimizer(const OptimizerConfig& config, const BucketPlan& plan,
                             ParameterStore& store, int rank, const ModePlan& mode,
                             std::int64_t total_steps, const InitialValues& initial,
                             ParameterShards* shards)
    : config_(config),
      plan_(plan),
      store_(store),
      total_steps_(total_steps),
      master_weights_(mode.master_weights),
      state_names_(optimizer_state_names(config)) {
  ZL_CHECK(mode.param_dtype == store.param_dtype(), "a {} mode plan for a {} parameter store",
           dtype_name(mode.param_dtype), dtype_name(store.param_dtype()));
  ZL_CHECK((shards != nullptr) == (store.storage() == ParamStorage::Gathered),
           "parameter shards go with a store of gathered parameters, and only there");
  ZL_CHECK(!has_masters() || initial, "bf16 masters need the fp32 initial values");
  buckets_.resize(plan.buckets.size());
  std::vector<std::int16_t> host_remainder;
  for (const auto& b : plan.buckets) {
    if (!mode.steps_on(b, rank)) continue;
    SteppedBucket& mine = at(b.index);
    const ElementRange range = mode.stepped_range(plan, b, rank);
    mine.owned = true;
    mine.range = range;
    mine.param_base = shards ? static_cast<char*>(shards->at(b.index))
                             : static_cast<char*>(store.raw_data()) +
                                   range.offset * dtype_size(store.param_dtype());
    for (std::size_t i = 0; i < state_names_.size(); ++i) {
      mine.state.emplace_back(store.device(), range.numel);
    }
    if (!has_masters()) continue;
    // Exactly the fp32 initial values: the store holds master_to_bf16 of them (Model::
    // initialize_parameters), so the fp32 master, or the bf16 parameter joined with the
    // remainder, is the fp32 initial value bit for bit.
    const std::vector<float> init = initial(range.offset, range.numel);
    DeviceBuffer& master = mine.master;
    if (master_weights_ == MasterWeights::Fp32) {
      master = DeviceBuffer(store.device(), range.numel, DType::F32);
      copy_from_host(init.data(), master.data(), store.device(), range.numel);
    } else {
      master = DeviceBuffer(store.device(), range.numel, DType::BF16);
      host_remainder.resize(init.size());
      for (std::size_t i = 0; i < init.size(); ++i) host_remainder[i] = split_master(init[i]).lo;
      copy_from_host(host_remainder.data(), remainders_of(master), store.device(), range.numel);
    }
  }
}

StepScalars RankOptimizer::next_step(float grad_scale) {
  ++t_;
  return StepScalars{
      .t = t_, .lr = scheduled_lr(config_, t_, total_steps_), .grad_scale = grad_scale};
}

void RankOptimizer::step_bucket(int bucket, const StepScalars& s, const ExecContext& exec,
                                const BucketGradient& grad) {
  SteppedBucket& mine = at(bucket);
  ZL_CHECK(mine.owned, "bucket {} stepped on a rank that does not own it", bucket);
  // The stepped part: the whole bucket, or this rank's shard (Note [Shard layout]: the update is
  // element-wise, so a shard cutting through a parameter steps its part exactly).
  const std::int64_t n = mine.range.numel;
  const bool adam = config_.kind != OptimizerKind::Sgd;
  const AdamHyper adam_hyper{config_.lr,           config_.beta1,       config_.beta2,
                             config_.eps,          config_.weight_decay,
                             config_.kind == OptimizerKind::AdamW};
  const SgdHyper sgd_hyper{config_.lr, config_.momentum, config_.dampening, config_.weight_decay,
                           config_.nesterov};
  // Adam's m, or SGD's momentum buffer; null for plain SGD (no state: momentum 0).
  float* m = mine.state.empty() ? nullptr : mine.state[0].data();
  if (has_masters()) {
    const bool fp32_master = master_weights_ == MasterWeights::Fp32;
    Bf16OptimizerSlice slice{.grad = grad.data,
                             .grad_dtype = grad.dtype,
                             .param = param_at<Bf16>(bucket, 0),
                             .master_weights = master_weights_,
                             .master = fp32_master ? mine.master.data() : nullptr,
                             .remainder = fp32_master ? nullptr : remainders_of(mine.master),
                             .m = m};
    if (adam) {
      slice.v = mine.state[1].data();
      adam_step_bf16(exec, slice, n, make_adam_step(adam_hyper, s.lr, s.t, s.grad_scale));
    } else {
      sgd_step_bf16(exec, slice, n, make_sgd_step(sgd_hyper, s.lr, s.t, s.grad_scale));
    }
  } else {
    ZL_CHECK(grad.dtype == DType::F32, "bucket {}: {} gradients for fp32 parameters", bucket,
             dtype_name(grad.dtype));
    float* p = param_at<float>(bucket, 0);
    const auto* g = static_cast<const float*>(grad.data);
    if (adam) {
      adam_step(exec, p, g, m, mine.state[1].data(), n,
                make_adam_step(adam_hyper, s.lr, s.t, s.grad_scale));
    } else {
      sgd_step(exec, p, g, m, n, make_sgd_step(sgd_hyper, s.lr, s.t, s.grad_scale));
    }
  }
}

int RankOptimizer::stepped_bucket_of(int param_id, const char* what) const {
  ZL_CHECK(param_id >= 0 && param_id < store_.count(), "{}: no parameter {}", what, param_id);
  const int bucket = plan_.bucket_of_param.at(static_cast<std::size_t>(param_id));
  ZL_CHECK(owns(bucket), "{}: parameter '{}' (bucket {}) is not stepped on this rank", what,
           store_.info(param_id).name, bucket);
  return bucket;
}

std::int64_t RankOptimizer::index_in_stepped(int bucket, const ElementRange& range,
                                             const char* what) const {
  ZL_CHECK(owns(bucket), "{}: bucket {} is not stepped on this rank", what, bucket);
  const ElementRange& mine = at(bucket).range;
  ZL_CHECK(mine.contains(range),
           "{}: elements [{}, {}) of bucket {} are not within this rank's [{}, {})", what,
           range.offset, range.end(), bucket, mine.offset, mine.end());
  return range.offset - mine.offset;
}

void RankOptimizer::read_master(int param_id, float* out) const {
  const int bucket = stepped_bucket_of(param_id, "read_master");
  const ParameterInfo& p = store_.info(param_id);
  read_master_range(bucket, {p.offset, p.numel}, out);
}

void RankOptimizer::write_master(int param_id, const float* values) {
  const int bucket = stepped_bucket_of(param_id, "write_master");
  const ParameterInfo& p = store_.info(param_id);
  write_master_range(bucket, {p.offset, p.numel}, values);
}

void RankOptimizer::read_master_range(int bucket, const ElementRange& range, float* out) const {
  const std::int64_t within = index_in_stepped(bucket, range, "read_master");
  const DeviceKind device = store_.device();
  const std::int64_t n = range.numel;
  if (!has_masters()) {
    copy_to_host(param_at<float>(bucket, within), device, out, n);
    return;
  }
  const DeviceBuffer& master = at(bucket).master;
  if (master_weights_ == MasterWeights::Fp32) {
    copy_to_host(master.data() + within, device, out, n);
    return;
  }
  std::vector<Bf16> hi(static_cast<std::size_t>(n));
  std::vector<std::int16_t> lo(hi.size());
  copy_to_host(param_at<Bf16>(bucket, within), device, hi.data(), n);
  copy_to_host(remainders_of(master) + within, device, lo.data(), n);
  for (std::size_t i = 0; i < hi.size(); ++i) out[i] = join_master(hi[i], lo[i]);
}

void RankOptimizer::write_master_range(int bucket, const ElementRange& range,
                                       const float* values) {
  const std::int64_t within = index_in_stepped(bucket, range, "write_master");
  const DeviceKind device = store_.device();
  const std::int64_t n = range.numel;
  if (!has_masters()) {
    copy_from_host(values, param_at<float>(bucket, within), device, n);
    return;
  }
  const DeviceBuffer& master = at(bucket).master;
  // Both layouts give the parameter master_to_bf16(value) = split_master(value).hi.
  std::vector<Bf16> hi(static_cast<std::size_t>(n));
  std::vector<std::int16_t> lo(hi.size());
  for (std::size_t i = 0; i < hi.size(); ++i) {
    const SplitMaster split = split_master(values[i]);
    hi[i] = split.hi;
    lo[i] = split.lo;
  }
  copy_from_host(hi.data(), param_at<Bf16>(bucket, within), device, n);
  if (master_weights_ == MasterWeights::Fp32) {
    copy_from_host(values, master.data() + within, device, n);
  } else {
    copy_from_host(lo.data(), remainders_of(master) + within, device, n);
  }
}

float* RankOptimizer::param_state(int param_id, int which) {
  const int bucket = plan_.bucket_of_param.at(static_cast<std::size_t>(param_id));
  const SteppedBucket& mine = at(bucket);
  if (!mine.owned || which < 0 || which >= static_cast<int>(state_names_.size())) return nullptr;
  const ParameterInfo& p = store_.info(param_id);
  if (!mine.range.contains({p.offset, p.numel})) return nullptr;
  return mine.state[static_cast<std::size_t>(which)].data() + (p.offset - mine.range.offset);
}

float* RankOptimizer::state_at(int bucket, int which, std::int64_t element) {
  const std::int64_t within = index_in_stepped(bucket, {element, 0}, "state_at");
  ZL_CHECK(which >= 0 && which < static_cast<int>(state_names_.size()), "state_at: state {}",
           which);
  return at(bucket).state[static_cast<std::size_t>(which)].data() + within;
}

std::int64_t RankOptimizer::state_bytes() const {
  std::int64_t bytes = 0;
  for (const SteppedBucket& b : buckets_) bytes += total_bytes(b.state);
  return bytes;
}

std::int64_t RankOptimizer::master_bytes() const {
  std::int64_t bytes = 0;
  for (const SteppedBucket& b : buckets_) bytes += b.master.bytes();
  return bytes;
}

}  // namespace zl
