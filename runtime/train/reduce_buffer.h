// ReduceBuffer: the buffer a bucket's gradient collective runs on (docs/design.md "Precision").
// Gradients accumulate in the store's fp32 gradient buffer. With reduce_dtype = "fp32" a bucket's
// collective runs on that slice in place. With "bf16" the bucket's fp32 gradients are cast
// (rounded once, to nearest even) into a bf16 buffer right before its collective - 2 bytes per
// element of the flat layout, the same offsets, allocated on every rank (every rank sends every
// bucket) - and the optimizer and the clip norm read the reduced bf16 gradients there.
#pragma once

#include <cstdint>

#include "base/device_buffer.h"
#include "base/dtype.h"
#include "base/exec_context.h"
#include "kernels/elementwise.h"
#include "models/parameter_store.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/sharded_optimizer.h"

namespace zl {

class ReduceBuffer {
 public:
  ReduceBuffer(ParameterStore& store, DType dtype);

  DType dtype() const { return dtype_; }
  // Bucket b's collective buffer, made ready on `exec` (bf16: the cast of its fp32 gradients,
  // enqueued on exec's stream; fp32: the gradients themselves, nothing to do).
  void* prepare(const Bucket& b, const ExecContext& exec);
  // Bucket b's gradients as its collective left them (the optimizer's input).
  BucketGradient gradient(const Bucket& b) const;
  // Bytes of the bf16 buffer (reduce_dtype = "bf16"; 0 for fp32, which reduces in place): with
  // the store's fp32 gradients, what RankMemory::gradients counts.
  std::int64_t bf16_bytes() const { return bf16_.bytes(); }

 private:
  ParameterStore& store_;
  DType dtype_;
  DeviceBuffer bf16_;  // bf16 only: total_numel elements
};

}  // namespace zl
