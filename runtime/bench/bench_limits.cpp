// measure_limits: the micro-benchmarks beside the bench's modes (see bench_limits.h). Each run
// starts at a barrier so all ranks run it at once, as in training; a figure is the best run's
// time on the slowest rank. Repetition counts are agreed on across ranks (collectives must match).
#include "runtime/bench/bench_limits.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <tuple>

#include "base/device_buffer.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/gemm_info.h"
#include "kernels/optimizer_kernels.h"
#include "models/model.h"
#include "base/clock.h"
#include "runtime/bench/timing_collectives.h"
#include "runtime/comm/backends/device.h"
#include "runtime/comm/link/simulated_link.h"
#include "runtime/comm/timed_mpi.h"

namespace zl {
namespace {

constexpr double kTargetSeconds = 0.03;  // per measurement, after one untimed run
constexpr int kMaxReps = 50;

// Runs fn once untimed, then enough times for ~kTargetSeconds (the same count on every rank),
// each run started at a barrier. Returns the fastest run's time, max over ranks: a limit is what
// the machine can do, and on a shared machine slower runs measure the other tenants.
template <typename Fn>
double time_collectively(const World& world, const WaitLimit& limit, Fn&& fn) {
  aligned_barrier(world, limit);
  auto start = Clock::now();
  fn();
  const double first = max_over_ranks(world, limit, seconds_since(start));
  const int reps = std::clamp(static_cast<int>(std::ceil(kTargetSeconds / std::max(first, 1e-7))),
                              3, kMaxReps);
  std::vector<double> runs(static_cast<std::size_t>(reps));
  for (double& run : runs) {
    aligned_barrier(world, limit);
    start = Clock::now();
    fn();
    run = seconds_since(start);
  }
  max_over_ranks(world, limit, runs);
  return *std::min_element(runs.begin(), runs.end());
}

// time_collectively for work on `exec`'s stream: on the CPU the same; on CUDA each timed run
// enqueues a batch of `fn` (about a millisecond of work) and waits for the stream, so the host's
// launch and wait overheads are amortised; returns the time of one `fn`.
template <typename Fn>
double time_on(const ExecContext& exec, const World& world, const WaitLimit& limit, Fn&& fn) {
  if (exec.device != DeviceKind::Cuda) return time_collectively(world, limit, fn);
  auto start = Clock::now();
  fn();
  synchronize_stream(exec);
  const double first = max_over_ranks(world, limit, seconds_since(start));
  const int batch = std::clamp(static_cast<int>(std::ceil(1e-3 / std::max(first, 1e-7))), 1, 100);
  return time_collectively(world, limit, [&] {
           for (int i = 0; i < batch; ++i) fn();
           synchronize_stream(exec);
         }) /
         batch;
}

std::vector<GemmLimit> model_gemm_shapes(const Config& config) {
  // Linear weights are the 2-D parameters, (out, in); the batch is data.batch_size per rank.
  const Model model(config.model, DeviceKind::Cpu);
  const std::int64_t batch = config.data.batch_size;
  std::map<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>, int> shapes;
  bool first = true;  // the first Linear computes no d(input) (models/model.cpp)
  for (const ParameterInfo& p : model.store().parameters()) {
    if (p.shape.size() != 2) continue;
    const std::int64_t out = p.shape[0], in = p.shape[1];
    ++shapes[{"forward", batch, out, in}];             // y (B, out) = x (B, in) W^T
    if (!first) ++shapes[{"backward_data", batch, in, out}];  // dx (B, in) = dy (B, out) W
    ++shapes[{"backward_weight", out, in, batch}];     // dW (out, in) = dy^T x
    first = false;
  }
  std::vector<GemmLimit> out;
  for (const auto& [key, count] : shapes) {
    const auto& [pass, m, n, k] = key;
    out.push_back({pass, m, n, k, count});
  }
  return out;
}

// On `exec` (its gemm_math: TF32 or not): the CPU GEMM, or cuBLAS on the device's compute stream
// (the handle the layers use). In bf16 the operands are bf16 and, as in the layers, forward and
// backward_data write bf16 activations while backward_weight writes the fp32 gradient buffer.
void measure_gemm(const ExecContext& exec, const World& world, const WaitLimit& limit, DType dtype,
                  GemmLimit& g) {
  const DeviceBuffer a(exec.device, g.m * g.k, dtype), b(exec.device, g.k * g.n, dtype);
  const DType out = dtype == DType::BF16 && g.pass != "backward_weight" ? DType::BF16 : DType::F32;
  const DeviceBuffer c(exec.device, g.m * g.n, out);
  // Same transposes as the layers: forward uses W^T, backward_weight dy^T.
  const Transpose ta = g.pass == "backward_weight" ? Transpose::Yes : Transpose::No;
  const Transpose tb = g.pass == "forward" ? Transpose::Yes : Transpose::No;
  const std::int64_t lda = ta == Transpose::Yes ? g.m : g.k;
  const std::int64_t ldb = tb == Transpose::Yes ? g.k : g.n;
  const double s = time_on(exec, world, limit, [&] {
    if (dtype == DType::F32) {
      gemm(exec, ta, tb, g.m, g.n, g.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), g.n);
    } else if (out == DType::BF16) {
      gemm(exec, ta, tb, g.m, g.n, g.k, 1.0f, a.data<Bf16>(), lda, b.data<Bf16>(), ldb, 0.0f,
           c.data<Bf16>(), g.n);
    } else {
      gemm(exec, ta, tb, g.m, g.n, g.k, 1.0f, a.data<Bf16>(), lda, b.data<Bf16>(), ldb, 0.0f,
           c.data(), g.n);
    }
  });
  g.gflops = 2.0 * static_cast<double>(g.m * g.n * g.k) / s * 1e-9;
}

std::string gemm_kernel_name(const ExecContext& exec, ComputePrecision precision) {
  if (exec.device == DeviceKind::Cuda) {
    switch (precision) {
      case ComputePrecision::Fp32: return "cuBLAS SGEMM (fp32, default math mode)";
      case ComputePrecision::Tf32: return "cuBLAS GemmEx (TF32 tensor cores, fp32 accumulation)";
      case ComputePrecision::Bf16: return "cuBLAS GemmEx (bf16 inputs, fp32 accumulation)";
    }
  }
  const std::string cpu = describe_cpu_gemm(cpu_gemm_info());
  switch (precision) {
    case ComputePrecision::Fp32: return cpu;
    case ComputePrecision::Tf32: return cpu + "; tf32 is fp32 on the CPU";
    case ComputePrecision::Bf16: return cpu + "; bf16 inputs, fp32 accumulation";
  }
  return cpu;
}

// Writes every element of a buffer that a timed kernel only reads. A fresh CPU DeviceBuffer is
// mapped zero pages (base/device_buffer.cpp): read without a write first, every load hits the one
// shared zero page in cache and the figure measures the cache, not the memory.
void write_once(const ExecContext& exec, const DeviceBuffer& buffer) {
  if (buffer.dtype() == DType::BF16) {
    scale(exec, buffer.data<Bf16>(), buffer.size(), 1.0f);
  } else {
    scale(exec, buffer.data(), buffer.size(), 1.0f);
  }
}

// The memory bandwidth of a rank: the `add` kernel (c = a + b: 12 bytes per element, STREAM's
// "add") on the rank's compute context, so on the CPU split across runtime.threads as the
// optimizer step is. 3 x 1 GiB on a GPU, past any GPU's cache.
double measure_bandwidth(const ExecContext& exec, const World& world, const WaitLimit& limit) {
  const std::int64_t n =
      exec.device == DeviceKind::Cuda ? std::int64_t{256} << 20 : kCpuBandwidthElements;
  const DeviceBuffer a(exec.device, n), b(exec.device, n), c(exec.device, n);
  write_once(exec, a);
  write_once(exec, b);
  const double s = time_on(exec, world, limit, [&] { add(exec, a.data(), b.data(), c.data(), n); });
  return 3.0 * 4.0 * static_cast<double>(n) / s * 1e-9;
}

// The fused step the trainer runs in `precision`: fp32 parameters, or bf16 parameters with the
// fp32 master or remainders and gradients of reduce_dtype (kernels/optimizer_kernels.h), with
// the bytes per element it moves.
void measure_optimizer(const Config& config, const ExecContext& exec, const World& world,
                       const WaitLimit& limit,
                       const PrecisionConfig& precision, PrecisionLimits& out) {
  const Model model(config.model, DeviceKind::Cpu);
  // At least the bandwidth kernel's size on the CPU (64M elements on a GPU), so that a small
  // model's state does not fit in cache and the figure compares with the memory bandwidth.
  const std::int64_t floor =
      exec.device == DeviceKind::Cuda ? std::int64_t{64} << 20 : kCpuBandwidthElements;
  const std::int64_t n = std::max<std::int64_t>(model.store().total_numel(), floor);
  const bool bf16 = precision.compute == ComputePrecision::Bf16;
  const DType param_dtype = bf16 ? DType::BF16 : DType::F32;
  const DType grad_dtype = bf16 ? precision.reduce_dtype : DType::F32;
  const DeviceBuffer p(exec.device, n, param_dtype), g(exec.device, n, grad_dtype);
  const DeviceBuffer m(exec.device, n), v(exec.device, n);
  write_once(exec, g);  // the only buffer the step reads without writing
  // bf16: the fp32 masters, or the int16 remainders in a buffer of 2-byte elements.
  const DeviceBuffer master = !bf16 ? DeviceBuffer()
                              : precision.master_weights == MasterWeights::Fp32
                                  ? DeviceBuffer(exec.device, n)
                                  : DeviceBuffer(exec.device, n, DType::BF16);
  Bf16OptimizerSlice slice;
  if (bf16) {
    slice.grad = g.raw();
    slice.grad_dtype = grad_dtype;
    slice.param = p.data<Bf16>();
    slice.master_weights = precision.master_weights;
    if (precision.master_weights == MasterWeights::Fp32) {
      slice.master = master.data();
    } else {
      slice.remainder = static_cast<std::int16_t*>(master.raw());
    }
  }
  const OptimizerConfig& o = config.optimizer;
  double s = 0.0;
  if (o.kind == OptimizerKind::Sgd) {
    const SgdHyper h{o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov};
    float* buf = o.momentum != 0.0f ? m.data() : nullptr;
    slice.m = buf;
    s = time_on(exec, world, limit, [&] {
      if (bf16) {
        sgd_step_bf16(exec, slice, n, make_sgd_step(h, o.lr, 2, 1.0f));
      } else {
        sgd_step(exec, p.data(), g.data(), buf, n, make_sgd_step(h, o.lr, 2, 1.0f));
      }
    });
  } else {
    const bool adamw = o.kind == OptimizerKind::AdamW;
    const AdamHyper h{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, adamw};
    slice.m = m.data();
    slice.v = v.data();
    s = time_on(exec, world, limit, [&] {
      if (bf16) {
        adam_step_bf16(exec, slice, n, make_adam_step(h, o.lr, 2, 1.0f));
      } else {
        adam_step(exec, p.data(), g.data(), m.data(), v.data(), n,
                  make_adam_step(h, o.lr, 2, 1.0f));
      }
    });
  }
  out.optimizer_bytes_per_element = optimizer_step_bytes_per_element(
      o.kind, o.momentum != 0.0f, param_dtype, precision.master_weights, grad_dtype);
  out.optimizer_gbps = static_cast<double>(out.optimizer_bytes_per_element * n) / s * 1e-9;
}

// Times every size on `comm` of `members` ranks `stride` apart, whose place on the modelled
// machine is `span`.
void measure_on(Communicator& comm, int members, int stride, LinkSpan span, const World& world,
                const WaitLimit& limit, const DeviceBuffer& buf,
                const std::vector<CollectiveSize>& sizes, BenchLimits& out) {
  for (const auto& s : sizes) {
    const std::int64_t n = s.bytes / dtype_size(s.dtype);
    const CollectiveOp op = collective_op_named(s.op);
    const double seconds = time_collectively(world, limit, [&] {
      switch (op) {
        case CollectiveOp::AllReduce:
          comm.all_reduce(buf.raw(), n, s.dtype, ReduceOp::Sum).wait();
          break;
        case CollectiveOp::Reduce:
          comm.reduce(buf.raw(), n, s.dtype, 0, ReduceOp::Sum).wait();
          break;
        case CollectiveOp::ReduceScatter:
          comm.reduce_scatter(buf.raw(), n, s.dtype, ReduceOp::Sum).wait();
          break;
        case CollectiveOp::AllGather: comm.all_gather(buf.raw(), n, s.dtype).wait(); break;
        default: comm.broadcast(buf.raw(), n, s.dtype, 0).wait(); break;
      }
    });
    // The wire bytes are the span's ranks' (link.ranks sets them: Note [Link model]).
    out.collectives.push_back(
        {.op = s.op, .dtype = s.dtype, .bytes = s.bytes, .seconds = seconds,
         .algbw_gbps = static_cast<double>(s.bytes) / seconds * 1e-9,
         .busbw_gbps = static_cast<double>(wire_bytes(op, s.bytes, span.ranks)) / seconds * 1e-9,
         .tier = span.tier, .ranks = span.ranks, .members = members, .stride = stride});
  }
}

// Sorted, without repeats.
std::vector<CollectiveSize> distinct(std::vector<CollectiveSize> sizes) {
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

// Times `sizes` on this rank's communicator of `members` world ranks `stride` apart, as the
// trainer splits them (a shard group of consecutive ranks; one rank of each group), named `name`,
// at `span`. Collective.
void measure_split(const Config& config, const Device& device, const World& world,
                   const WaitLimit& limit, const RankLinks& links, int members, int stride,
                   LinkSpan span, const char* name, const DeviceBuffer& buf,
                   const std::vector<CollectiveSize>& sizes, BenchLimits& out) {
  const int block = members * stride;
  MPI_Comm split = timed_comm_split(world.comm, world.rank / block * stride + world.rank % stride,
                                    world.rank, limit, "the bench limits' split of the world");
  struct FreeComm {
    MPI_Comm& c;
    ~FreeComm() { MPI_Comm_free(&c); }
  } free_split{split};
  std::unique_ptr<Communicator> comm = with_simulated_link(
      device.make_communicator(split, name, comm_options(config.runtime)), links, span);
  measure_on(*comm, members, stride, span, world, limit, buf, sizes, out);
}

// On the device's communicator backend (NCCL on CUDA, MPI on the CPU) with buffers where the
// model lives, through the link model when it is on: the flat modes' sizes on the world
// communicator, timed as the modes' flat communicators are; with two tiers where the world spans
// several nodes, on a communicator of each node's ranks too, timed inside a node for
// link.node_ranks ranks (so also in a link.ranks study, whose real node may hold fewer). The
// hybrid rows' sizes on communicators of their shapes (a node's measurement serves a shard group
// of a node's ranks). All nodes, groups or replica sets measure at once.
void measure_collectives(const Config& config, const Device& device, const World& world,
                         const WaitLimit& limit, std::vector<CollectiveSize> sizes,
                         BenchLimits& out) {
  for (CollectiveSize& s : sizes) {  // the world's: members 0
    if (s.members == world.size && s.stride == 1) s.members = 0;
  }
  sizes = distinct(std::move(sizes));
  if (sizes.empty()) return;
  std::int64_t largest = 0;
  for (const auto& s : sizes) largest = std::max(largest, s.bytes);
  const DeviceBuffer buf(device.kind(), largest / 4 + 1);  // bytes, for either dtype
  out.collectives_local = world.size == 1 && !config.link.enabled();
  const RankLinks links = make_rank_links(config.link, config.runtime.timeout_s);
  const LinkSpan flat = flat_link_span(config.link, world.size);
  out.flat_tier = flat.tier;
  // The communicators and what each times, in an order every rank agrees on.
  std::map<std::pair<int, int>, std::vector<CollectiveSize>> on;  // (members, stride)
  for (const CollectiveSize& s : sizes) on[{s.members, s.stride}].push_back(s);
  const std::vector<CollectiveSize> flat_sizes = on[{0, 1}];
  on.erase({0, 1});
  if (!flat_sizes.empty()) {
    std::unique_ptr<Communicator> comm = with_simulated_link(
        device.make_communicator(world.comm, "bench.limits", comm_options(config.runtime)), links,
        flat);
    measure_on(*comm, world.size, 1, flat, world, limit, buf, flat_sizes, out);
  }
  const int node_ranks = config.link.node_ranks;
  if (node_ranks > 1 && flat.tier != LinkTier::Intra) {
    // Each tier measured for the flat sizes, and a shard group of one node's ranks.
    std::vector<CollectiveSize> in_node = flat_sizes;
    if (const auto group = on.extract({node_ranks, 1})) {
      in_node.insert(in_node.end(), group.mapped().begin(), group.mapped().end());
    }
    for (CollectiveSize& s : in_node) {
      s.members = node_ranks;
      s.stride = 1;
    }
    in_node = distinct(std::move(in_node));  // a flat size may be a group's too
    // A link.ranks study's node may hold more ranks than the job: then one split of every rank.
    measure_split(config, device, world, limit, links, node_ranks, 1,
                  {node_ranks, LinkTier::Intra}, "bench.limits.node", buf, in_node, out);
  }
  for (const auto& [shape, list] : on) {
    const auto [members, stride] = shape;
    measure_split(config, device, world, limit, links, members, stride,
                  link_span(config.link, world.size, members, stride),
                  stride == 1 ? "bench.limits.group" : "bench.limits.replicas", buf, list, out);
  }
}

}  // namespace

double BenchLimits::collective_seconds(const std::string& op, DType dtype, std::int64_t bytes,
                                       int members, int stride) const {
  for (const auto& c : collectives) {
    if (c.op == op && c.dtype == dtype && c.bytes == bytes && c.members == members &&
        c.stride == stride) {
      return c.seconds;
    }
  }
  return 0.0;
}

BenchLimits measure_limits(const Config& config, const Device& device, const World& world,
                           const std::vector<PrecisionConfig>& precisions,
                           const std::vector<CollectiveSize>& sizes) {
  // runtime.threads resolved, as the Trainer resolves it: the GEMMs' OpenMP team, and the
  // threads the compute context's CPU kernels split across.
  const int threads = cpu_threads(config.runtime.threads, world);
  set_cpu_gemm_threads(threads);
  const WaitLimit limit{world.rank, config.runtime.timeout_s};
  BenchLimits out;
  out.device = device.kind();
  out.device_summary = device.summary();
  ExecContext compute = device.compute();
  compute.cpu_threads = threads;  // as the Trainer's compute context (unused on CUDA)
  out.triad_gbps = measure_bandwidth(compute, world, limit);
  for (const PrecisionConfig& precision : precisions) {
    // The GEMM math of the precision, as the trainer's compute context has it.
    ExecContext exec = compute;
    exec.gemm_math = precision.compute == ComputePrecision::Tf32 ? GemmMath::Tf32 : GemmMath::Fp32;
    const DType dtype = precision.compute == ComputePrecision::Bf16 ? DType::BF16 : DType::F32;
    PrecisionLimits p;
    p.precision = to_string(precision.compute);
    p.gemm_kernel = gemm_kernel_name(exec, precision.compute);
    p.gemm = model_gemm_shapes(config);
    for (auto& g : p.gemm) {
      measure_gemm(exec, world, limit, dtype, g);
      p.gemm_step_s += g.count * 2.0 * static_cast<double>(g.m * g.n * g.k) / (g.gflops * 1e9);
    }
    p.gemm_step_s *= static_cast<double>(config.train.grad_accum);
    measure_optimizer(config, exec, world, limit, precision, p);
    p.optimizer_vs_triad = out.triad_gbps > 0.0 ? p.optimizer_gbps / out.triad_gbps : 0.0;
    out.precisions.push_back(std::move(p));
  }
  measure_collectives(config, device, world, limit, sizes, out);
  return out;
}

}  // namespace zl
