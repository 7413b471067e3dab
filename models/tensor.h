// A Tensor is a non-owning view: a pointer, a 2-D shape (rows, cols), the device it lives on and
// its element type (fp32 or bf16; docs/design.md, "Precision"). Vectors are (1, n). Storage is
// owned by DeviceBuffers (parameter store, tape arena); creating, copying or slicing a Tensor never
// copies data. Typed access checks the dtype: reading a bf16 tensor as fp32 is a bug, not a cast.
#pragma once

#include <cstdint>

#include "base/bf16.h"
#include "base/dtype.h"
#include "base/errors.h"
#include "base/exec_context.h"

namespace zl {

struct Tensor {
  void* ptr = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  DeviceKind device = DeviceKind::Cpu;
  DType dtype = DType::F32;

  std::int64_t numel() const { return rows * cols; }
  std::int64_t bytes() const { return numel() * dtype_size(dtype); }

  // The elements as T (float or Bf16); T must be the tensor's dtype (an empty view passes).
  template <class T>
  T* as() const {
    ZL_CHECK(ptr == nullptr || dtype_of<T> == dtype, "a {} tensor ({}, {}) read as {}",
             dtype_name(dtype), rows, cols, dtype_name(dtype_of<T>));
    return static_cast<T*>(ptr);
  }
  float* f32() const { return as<float>(); }
  Bf16* bf16() const { return as<Bf16>(); }

  // Rows [begin, begin + count) as a view.
  Tensor row_slice(std::int64_t begin, std::int64_t count) const {
    char* base = static_cast<char*>(ptr);
    return Tensor{base == nullptr ? nullptr : base + begin * cols * dtype_size(dtype), count, cols,
                  device, dtype};
  }
};

}  // namespace zl
