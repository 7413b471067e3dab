// Where a kernel runs. Every kernel entry point takes an ExecContext and dispatches to the CPU or
// the CUDA implementation; the build decides whether CUDA exists (ZEROLAP_WITH_CUDA). Kernels
// never allocate or synchronise behind the caller's back: on CUDA they are enqueued on `stream`.
#pragma once

namespace zl {

enum class DeviceKind { Cpu, Cuda };

// How an fp32 GEMM may compute on CUDA (docs/design.md, "Precision"): Fp32 is full fp32 (cuBLAS's
// default math); Tf32 lets cuBLAS round the inputs to TF32 (10-bit mantissa) on tensor cores,
// accumulating in fp32. On the CPU both are plain fp32 (OpenBLAS has no TF32). bf16 GEMMs are
// a separate overload of gemm (kernels/gemm.h) and ignore this.
enum class GemmMath { Fp32, Tf32 };

inline const char* device_name(DeviceKind d) { return d == DeviceKind::Cpu ? "cpu" : "cuda"; }

struct ExecContext {
  DeviceKind device = DeviceKind::Cpu;
  void* stream = nullptr;  // cudaStream_t on CUDA; unused on CPU
  void* blas = nullptr;    // cublasHandle_t on CUDA (bound to `stream`); unused on CPU
  GemmMath gemm_math = GemmMath::Fp32;  // fp32 GEMMs; the runtime sets Tf32 for compute = "tf32"
  // CPU: threads the fused optimizer step and the element-wise kernels may split their work
  // across (kernels/cpu_parallel.h). The trainer's compute context gets runtime.threads
  // (resolved); the comm threads' contexts keep 1, so a step run on a comm thread (interleaved)
  // never competes with the compute threads for more cores.
  int cpu_threads = 1;
  // CUDA: the reductions that return a value to the host (a loss, a sum of squares) wait for
  // `stream`, which may itself wait for a collective that a dead peer never joins. With a limit
  // > 0 a longer wait is a RuntimeFailure (the trainer passes runtime.timeout_s), not a hang.
  double host_wait_timeout_s = 0.0;  // 0: no limit
};

// Whether a kernel's output overwrites (`=`) or accumulates into (`+=`) its destination.
// Gradients overwrite on the first micro-batch and accumulate on the others, so no zero_grad pass.
enum class Accumulate { Overwrite, Add };

}  // namespace zl
