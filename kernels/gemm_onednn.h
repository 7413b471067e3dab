// The oneDNN CPU engine that kernels/gemm.cpp runs its matmul primitives on; shared with
// kernels/gemm_info.cpp, which asks the same engine which kernel an f32 matmul gets.
// Internal to kernels/: callers of GEMM include kernels/gemm.h.
#pragma once

#include <dnnl.hpp>

namespace zl {

const dnnl::engine& cpu_gemm_engine();

}  // namespace zl
