// ZL_HD marks a function callable from host and device code: __host__ __device__ under nvcc,
// nothing in a plain C++ translation unit. Shared math (kernels/optim_math.h, base/bf16.h) uses
// it so the CPU loops and the CUDA kernels run the very same per-element code.
#pragma once

#if defined(__CUDACC__)
#define ZL_HD __host__ __device__
#else
#define ZL_HD
#endif
