// Where a kernel runs. Every kernel entry point takes an ExecContext and dispatches to the CPU or
// the CUDA implementation; the build decides whether CUDA exists (ZEROLAP_WITH_CUDA). Kernels
// never allocate or synchronise behind the caller's back: on CUDA they are enqueued on `stream`.
#pragma once

namespace zl {

enum class DeviceKind { Cpu, Cuda };

inline const char* device_name(DeviceKind d) { return d == DeviceKind::Cpu ? "cpu" : "cuda"; }

struct ExecContext {
  DeviceKind device = DeviceKind::Cpu;
  void* stream = nullptr;  // cudaStream_t on CUDA; unused on CPU
  void* blas = nullptr;    // cublasHandle_t on CUDA (bound to `stream`); unused on CPU
};

// Whether a kernel's output overwrites (`=`) or accumulates into (`+=`) its destination.
// Gradients overwrite on the first micro-batch and accumulate on the others, so no zero_grad pass.
enum class Accumulate { Overwrite, Add };

}  // namespace zl
