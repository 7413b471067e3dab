// GradientPool: stage 2's bucket buffers and gradient shards (see Note [Gradient pool]).
#include "runtime/train/step/gradient_pool.h"

#include <algorithm>

#include "base/errors.h"
#include "base/tracer.h"
#include "kernels/elementwise.h"

namespace zl {

GradientPool::GradientPool(const StepContext& step, int rank) : step_(step) {
  const ModePlan& mode = step.mode;
  const BucketPlan& plan = step.plan;
  ParameterStore& store = step.store;
  ZL_CHECK(mode.pools_gradients() && mode.element_shards, "a gradient pool for {}", mode.name());
  ZL_CHECK(store.gradient_storage() == GradientStorage::Bound,
           "stage 2 binds the gradients, but the store allocated its own");
  const std::size_t n = plan.buckets.size();
  const std::int64_t largest = plan.largest_bucket_numel();
  slots_.resize(static_cast<std::size_t>(mode.pool_buffers(plan)));
  for (Slot& s : slots_) {
    s.fp32 = DeviceBuffer(store.device(), largest);
    if (bf16_wire()) s.wire = DeviceBuffer(store.device(), largest, DType::BF16);
  }
  shard_at_.resize(n);
  shard_of_.resize(n);
  padding_.resize(n);
  acquired_.assign(n, 0);
  std::int64_t total = 0;
  for (const Bucket& b : plan.buckets) {
    const auto i = static_cast<std::size_t>(b.index);
    shard_of_[i] = mode.stepped_range(plan, b, rank);
    shard_at_[i] = total;
    total += shard_of_[i].numel;
    // Padding: what no parameter of the bucket covers (each one's alignment, the bucket's end).
    float* base = slots_[static_cast<std::size_t>(buffer_of(b.index))].fp32.data();
    std::int64_t at = 0;
    for (int id : b.param_ids) {
      const ParameterInfo& p = store.info(id);
      if (p.offset - b.offset > at) padding_[i].push_back({at, p.offset - b.offset - at});
      at = p.offset - b.offset + p.numel;
      store.bind_gradient(id, base + (p.offset - b.offset));
    }
    if (b.numel > at) padding_[i].push_back({at, b.numel - at});
  }
  shards_ = DeviceBuffer(store.device(), total);
}

std::int64_t GradientPool::pool_bytes() const {
  std::int64_t bytes = 0;
  for (const Slot& s : slots_) bytes += s.fp32.bytes() + s.wire.bytes();
  return bytes;
}

void GradientPool::begin_backward(Accumulate into_shard) {
  into_shard_ = into_shard;
  std::fill(acquired_.begin(), acquired_.end(), 0);
}

void GradientPool::before_grad_write(int param_id, const ExecContext& compute) {
  const int bucket = step_.plan.bucket_of_param[static_cast<std::size_t>(param_id)];
  char& acquired = acquired_[static_cast<std::size_t>(bucket)];
  if (acquired) return;
  acquired = 1;
  Slot& slot = slots_[static_cast<std::size_t>(buffer_of(bucket))];
  // The last user's reduce-scatter was issued (Note [Gradient pool]), so this wait ends.
  ZL_CHECK(slot.issued,
           "backward writes bucket {} before the reduce-scatter of bucket {}, which holds its "
           "pool buffer, was issued",
           bucket, slot.user);
  {
    TimelineScope timed(step_.timeline(), compute, "compute", "wait", bucket);
    slot.released.stream_wait(compute);
  }
  slot.user = bucket;
  slot.issued = false;
  for (const ElementRange& pad : padding_[static_cast<std::size_t>(bucket)]) {
    zero_fill(compute, slot.fp32.data() + pad.offset, pad.numel);
  }
}

void* GradientPool::prepare(const Bucket& b, const ExecContext& compute) {
  Slot& slot = slots_[static_cast<std::size_t>(buffer_of(b.index))];
  ZL_CHECK(slot.user == b.index && acquired_[static_cast<std::size_t>(b.index)],
           "bucket {} reduce-scattered without its pool buffer", b.index);
  if (!bf16_wire()) return slot.fp32.data();
  cast(compute, slot.fp32.data(), slot.wire.data<Bf16>(), b.numel);
  return slot.wire.raw();
}

Work GradientPool::accumulate_and_release(const Bucket& b, Communicator& comm) {
  Slot& slot = slots_[static_cast<std::size_t>(buffer_of(b.index))];
  const auto i = static_cast<std::size_t>(b.index);
  const ElementRange range = shard_of_[i];
  const std::int64_t within = range.offset - b.offset;  // the shard in the bucket's buffer
  float* shard = shards_.data() + shard_at_[i];
  float* received = slot.fp32.data() + within;
  const Bf16* wire = bf16_wire() ? slot.wire.data<Bf16>() + within : nullptr;
  const Accumulate into = into_shard_;
  // On the reduce stream after the reduce-scatter (communicator.h: then()). bf16 wire: the
  // received bf16 sums widen exactly to fp32; the fp32 buffer is free once it was cast.
  slot.released = comm.then([=](const ExecContext& stream) {
    if (wire != nullptr && into == Accumulate::Overwrite) {
      cast(stream, wire, shard, range.numel);
      return;
    }
    if (wire != nullptr) cast(stream, wire, received, range.numel);
    accumulate(stream, static_cast<const float*>(received), shard, range.numel, into);
  });
  slot.issued = true;
  return slot.released;
}

BucketGradient GradientPool::shard_gradient(const Bucket& b, const ElementRange& range) const {
  const auto i = static_cast<std::size_t>(b.index);
  const ElementRange& mine = shard_of_[i];
  ZL_CHECK(mine.contains(range),
           "elements [{}, {}) of bucket {} are not in this rank's gradient shard [{}, {})",
           range.offset, range.end(), b.index, mine.offset, mine.end());
  return BucketGradient{.data = shards_.data() + shard_at_[i] + (range.offset - mine.offset),
                        .dtype = DType::F32};
}

}  // namespace zl
