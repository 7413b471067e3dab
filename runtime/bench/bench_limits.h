// The machine's limits, measured in the bench's own run so the modes can be read against them:
// GEMM throughput at the model's shapes, memory bandwidth (STREAM's add on the rank's threads,
// all ranks at once since they share the memory bus), the fused optimizer's throughput against
// that bandwidth, and the time of each collective at each bucket size and dtype (through the
// [link] model when it is on, on each of its tiers). The GEMM and the optimizer are measured once
// per precision of the bench, in that precision's kernels and bytes per element. Every function
// here is collective: all ranks call it with the same arguments.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "base/exec_context.h"
#include "runtime/comm/backends/device.h"
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
  std::string op;  // collective_name(): "all_reduce", "reduce", "broadcast", "reduce_scatter", ...
  DType dtype = DType::F32;  // of the elements (a bf16 sum is another operation than an fp32 one)
  std::int64_t bytes = 0;  // payload
  double seconds = 0.0;    // one operation, max over ranks
  double algbw_gbps = 0.0;  // payload bytes / s, in GB/s (1e9)
  double busbw_gbps = 0.0;  // wire_bytes() per rank / s: comparable with the link bandwidth
  // Where it was timed: the tier, and the ranks its span counts (Note [Link model]); Inter and
  // the world size without a link.
  LinkTier tier = LinkTier::Inter;
  int ranks = 0;
  // On which communicator: `members` ranks `stride` apart (the world: its size and 1; a node:
  // link.node_ranks and 1; hybrid sharding's shard group G and 1, its replicas world / G and G).
  int members = 0, stride = 1;
};

// Note [Limits on the device]: on CUDA every figure is the GPU's: cuBLAS at the model's shapes on
// the compute stream, the `add` kernel's bandwidth (triad_gbps, STREAM add: 12 B/element) and
// the fused optimizer kernel, each timed over a batch of launches ending in a stream wait; the
// collectives on NCCL with device buffers. On the CPU: the CPU GEMM, the same `add` kernel and
// the fused step split across runtime.threads as in the trainer, MPI.
// The limits that depend on the precision: its GEMM (fp32; fp32 with TF32 math; bf16 inputs with
// fp32 accumulation, as the layers call them) and its fused optimizer step (fp32 parameters, or
// bf16 parameters with the fp32 master or remainders and the reduce_dtype gradient).
struct PrecisionLimits {
  std::string precision;    // the bench row's precision: "fp32", "tf32", "bf16"
  std::string gemm_kernel;  // which GEMM ran: describe_cpu_gemm() (kernels/gemm_info.h) or cuBLAS
  std::vector<GemmLimit> gemm;
  double gemm_step_s = 0.0;     // all GEMMs of one step at the measured rates (compute floor)
  double optimizer_gbps = 0.0;  // fused Adam/SGD step, bytes touched per second, per rank
  std::int64_t optimizer_bytes_per_element = 0;  // read + written
  double optimizer_vs_triad = 0.0;
};

struct BenchLimits {
  DeviceKind device = DeviceKind::Cpu;  // where they were measured
  std::string device_summary;           // Device::summary(): which GPU, or why the CPU
  double triad_gbps = 0.0;              // memory bandwidth per rank (the `add` kernel)
  std::vector<PrecisionLimits> precisions;  // one per precision of the bench, in its order
  // On the world communicator, tier flat_tier; with link.node_ranks where the world spans nodes,
  // also on a communicator of one node's ranks, tier Intra (so each tier is measured for the flat
  // modes' collectives); and those of hybrid rows on communicators of their shapes (members,
  // stride), as the trainer splits them.
  std::vector<CollectiveLimit> collectives;
  LinkTier flat_tier = LinkTier::Inter;  // the world's: flat_link_span (simulated_link.h)
  bool collectives_local = false;  // one rank, no link model: copies on this rank, no network

  // Time of `op` on `bytes` of `dtype` (exact size) from `collectives`, on the communicator of
  // `members` ranks `stride` apart (0 when not measured).
  double collective_seconds(const std::string& op, DType dtype, std::int64_t bytes, int members,
                            int stride) const;
};

struct CollectiveSize {
  std::string op;
  DType dtype = DType::F32;
  std::int64_t bytes = 0;
  // The communicator: `members` ranks `stride` apart, 0 for the world (collective_program.h's
  // CommPlace).
  int members = 0, stride = 1;
  auto operator<=>(const CollectiveSize&) const = default;  // by op, dtype, bytes, communicator
};

// The elements of each buffer of the CPU's bandwidth measurement, and the least the optimizer
// measurement steps on the CPU: 3 x 32 MiB per rank, well past the last-level cache of the
// machines this runs on.
inline constexpr std::int64_t kCpuBandwidthElements = std::int64_t{8} << 20;

// Measures every limit for `config`'s model in each of `precisions` and the given collective
// sizes (deduplicated), on `device`: runtime.device resolved as the runs resolve it.
BenchLimits measure_limits(const Config& config, const Device& device, const World& world,
                           const std::vector<PrecisionConfig>& precisions,
                           const std::vector<CollectiveSize>& sizes);

}  // namespace zl
