// GradientWire: the gradient collectives' buffer, fp32 in place or a bf16 cast (see gradient_wire.h).
#include "runtime/train/gradient_wire.h"

#include "base/bf16.h"

namespace zl {

GradientWire::GradientWire(ParameterStore& store, DType dtype) : store_(store), dtype_(dtype) {
  if (dtype_ == DType::BF16) wire_ = DeviceBuffer(store.device(), store.total_numel(), DType::BF16);
}

void* GradientWire::stage(const Bucket& b, const ExecContext& exec) {
  if (dtype_ == DType::F32) return store_.grad() + b.offset;
  Bf16* slice = wire_.data<Bf16>() + b.offset;
  cast(exec, store_.grad() + b.offset, slice, b.numel);
  return slice;
}

BucketGradient GradientWire::gradient(const Bucket& b) const {
  if (dtype_ == DType::F32) return BucketGradient{store_.grad() + b.offset, DType::F32};
  return BucketGradient{wire_.data<Bf16>() + b.offset, DType::BF16};
}

}  // namespace zl
