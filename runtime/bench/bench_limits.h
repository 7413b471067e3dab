// The machine's limits, measured in the bench's own run so the modes can be read against them:
// GEMM throughput at the model's shapes, memory bandwidth (a STREAM-style triad, all ranks at
// once since they share the memory bus), the fused optimizer's throughput against that bandwidth,
// and the time of each collective at each bucket size (through the [link] model when it is on).
// Every function here is collective: all ranks call it with the same arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/exec_context.h"
#include "runtime/config/config.h"
#include "runtime/comm/world.h"

namespace zl {

struct GemmLimit {
  std::string pass;  // "forward", "backward_data", "backward_weight"
  std::int64_t m = 0, n = 0, k = 0;
  int count = 0;        // how many times one step runs this shape
  double gflops = 0.0;  // this rank, all ranks running at once
};

struct CollectiveLimit {
  std::string op;  // "all_reduce", "reduce", "broadcast"
  std::int64_t bytes = 0;  // payload
  double seconds = 0.0;    // one operation, max over ranks
  double algbw_gbps = 0.0;  // payload bytes / s, in GB/s (1e9)
  double busbw_gbps = 0.0;  // wire_bytes() per rank / s: comparable with the link bandwidth
};

// Note [Limits on the device]: on CUDA every figure is the GPU's: cuBLAS at the model's shapes on
// the compute stream, the `add` kernel's bandwidth (triad_gbps, STREAM add: 12 B/element) and
// the fused optimizer kernel, each timed over a batch of launches ending in a stream wait; the
// collectives on NCCL with device buffers. On the CPU: the CPU GEMM, a triad loop, MPI.
struct BenchLimits {
  DeviceKind device = DeviceKind::Cpu;  // where they were measured
  std::string device_summary;           // Device::summary(): which GPU, or why the CPU
  std::string gemm_kernel;  // which GEMM ran: describe_cpu_gemm() (kernels/gemm_info.h) or cuBLAS
  std::vector<GemmLimit> gemm;
  double gemm_step_s = 0.0;     // all GEMMs of one step at the measured rates (compute floor)
  double triad_gbps = 0.0;      // per rank
  double optimizer_gbps = 0.0;  // fused Adam/SGD step, bytes touched per second, per rank
  std::int64_t optimizer_bytes_per_element = 0;  // read + written
  double optimizer_vs_triad = 0.0;
  std::vector<CollectiveLimit> collectives;
  bool collectives_local = false;  // one rank, no link model: copies on this rank, no network

  // Time of `op` on `bytes` from `collectives` (exact size; 0 when not measured).
  double collective_seconds(const std::string& op, std::int64_t bytes) const;
};

struct CollectiveSize {
  std::string op;
  std::int64_t bytes = 0;
};

// Measures every limit for `config`'s model and the given collective sizes (deduplicated).
BenchLimits measure_limits(const Config& config, const World& world,
                           const std::vector<CollectiveSize>& sizes);

}  // namespace zl
