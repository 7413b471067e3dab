// A Tensor is a non-owning view: a pointer, a 2-D shape (rows, cols) and the device it lives on.
// Vectors are (1, n). Storage is owned by DeviceBuffers (parameter store, tape arena); creating,
// copying or slicing a Tensor never copies data.
#pragma once

#include <cstdint>

#include "base/exec_context.h"

namespace zl {

struct Tensor {
  float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  DeviceKind device = DeviceKind::Cpu;

  std::int64_t numel() const { return rows * cols; }
  // Rows [begin, begin + count) as a view.
  Tensor row_slice(std::int64_t begin, std::int64_t count) const {
    return Tensor{data + begin * cols, count, cols, device};
  }
};

}  // namespace zl
