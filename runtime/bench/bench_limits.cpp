// measure_limits: the micro-benchmarks beside the bench's modes (see bench_limits.h). Each run
// starts at a barrier so all ranks run it at once, as in training; a figure is the best run's
// time on the slowest rank. Repetition counts are agreed on across ranks (collectives must match).
#include "runtime/bench/bench_limits.h"

#include <algorithm>
#include <chrono>
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
#include "runtime/comm/device.h"
#include "runtime/comm/simulated_link.h"

namespace zl {
namespace {

constexpr double kTargetSeconds = 0.03;  // per measurement, after one untimed run
constexpr int kMaxReps = 50;

double max_over_ranks(const World& world, double value) {
  double out = value;
  ZL_MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, world.comm));
  return out;
}

// Runs fn once untimed, then enough times for ~kTargetSeconds (the same count on every rank),
// each run started at a barrier. Returns the fastest run's time, max over ranks: a limit is what
// the machine can do, and on a shared machine slower runs measure the other tenants.
template <typename Fn>
double time_collectively(const World& world, Fn&& fn) {
  ZL_MPI_CHECK(MPI_Barrier(world.comm));
  auto start = Clock::now();
  fn();
  const double first = max_over_ranks(world, seconds_since(start));
  const int reps = std::clamp(static_cast<int>(std::ceil(kTargetSeconds / std::max(first, 1e-7))),
                              3, kMaxReps);
  std::vector<double> runs(static_cast<std::size_t>(reps));
  for (double& run : runs) {
    ZL_MPI_CHECK(MPI_Barrier(world.comm));
    start = Clock::now();
    fn();
    run = seconds_since(start);
  }
  ZL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, runs.data(), reps, MPI_DOUBLE, MPI_MAX, world.comm));
  return *std::min_element(runs.begin(), runs.end());
}

// time_collectively for work on `exec`'s stream: on the CPU the same; on CUDA each timed run
// enqueues a batch of `fn` (about a millisecond of work) and waits for the stream, so the host's
// launch and wait overheads are amortised; returns the time of one `fn`.
template <typename Fn>
double time_on(const ExecContext& exec, const World& world, Fn&& fn) {
  if (exec.device != DeviceKind::Cuda) return time_collectively(world, fn);
  auto start = Clock::now();
  fn();
  synchronize_stream(exec);
  const double first = max_over_ranks(world, seconds_since(start));
  const int batch = std::clamp(static_cast<int>(std::ceil(1e-3 / std::max(first, 1e-7))), 1, 100);
  return time_collectively(world, [&] {
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
    GemmLimit g;
    std::tie(g.pass, g.m, g.n, g.k) = key;
    g.count = count;
    out.push_back(g);
  }
  return out;
}

// On `exec`: the CPU GEMM, or cuBLAS on the device's compute stream (the handle the layers use).
void measure_gemm(const ExecContext& exec, const World& world, GemmLimit& g) {
  const DeviceBuffer a(exec.device, g.m * g.k), b(exec.device, g.k * g.n), c(exec.device, g.m * g.n);
  // Same transposes as the layers: forward uses W^T, backward_weight dy^T.
  const Transpose ta = g.pass == "backward_weight" ? Transpose::Yes : Transpose::No;
  const Transpose tb = g.pass == "forward" ? Transpose::Yes : Transpose::No;
  const std::int64_t lda = ta == Transpose::Yes ? g.m : g.k;
  const std::int64_t ldb = tb == Transpose::Yes ? g.k : g.n;
  const double s = time_on(exec, world, [&] {
    gemm(exec, ta, tb, g.m, g.n, g.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), g.n);
  });
  g.gflops = 2.0 * static_cast<double>(g.m * g.n * g.k) / s * 1e-9;
}

// 3 x 32 MiB per rank: well past the last-level cache of the machines this runs on.
constexpr std::int64_t kTriadElements = 8 << 20;

double measure_triad(const World& world) {
  constexpr std::int64_t kElements = kTriadElements;
  std::vector<float> a(kElements, 0.0f), b(kElements, 1.0f), c(kElements, 2.0f);
  const float scalar = 3.0f;
  const double s = time_collectively(world, [&] {
    float* __restrict pa = a.data();
    const float* __restrict pb = b.data();
    const float* __restrict pc = c.data();
    for (std::int64_t i = 0; i < kElements; ++i) pa[i] = pb[i] + scalar * pc[i];
  });
  return 3.0 * 4.0 * static_cast<double>(kElements) / s * 1e-9;
}

// The device's memory bandwidth: the `add` kernel (c = a + b: 12 bytes per element, STREAM's
// "add"), over 3 x 1 GiB, well past any GPU's cache.
double measure_device_bandwidth(const ExecContext& exec, const World& world) {
  constexpr std::int64_t kElements = std::int64_t{256} << 20;
  const DeviceBuffer a(exec.device, kElements), b(exec.device, kElements), c(exec.device, kElements);
  const double s = time_on(exec, world, [&] { add(exec, a.data(), b.data(), c.data(), kElements); });
  return 3.0 * 4.0 * static_cast<double>(kElements) / s * 1e-9;
}

void measure_optimizer(const Config& config, const ExecContext& exec, const World& world,
                       BenchLimits& out) {
  const Model model(config.model, DeviceKind::Cpu);
  // At least the triad's size (a GPU's: the bandwidth kernel's), so that a small model's state
  // does not fit in cache and the figure compares with the memory bandwidth.
  const std::int64_t floor = exec.device == DeviceKind::Cuda ? std::int64_t{64} << 20 : kTriadElements;
  const std::int64_t n = std::max<std::int64_t>(model.store().total_numel(), floor);
  const DeviceBuffer p(exec.device, n), g(exec.device, n), m(exec.device, n), v(exec.device, n);
  const OptimizerConfig& o = config.optimizer;
  double s = 0.0;
  if (o.kind == OptimizerKind::Sgd) {
    const SgdHyper h{o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov};
    float* buf = o.momentum != 0.0f ? m.data() : nullptr;
    s = time_on(exec, world, [&] {
      sgd_step(exec, p.data(), g.data(), buf, n, make_sgd_step(h, o.lr, 2, 1.0f));
    });
    out.optimizer_bytes_per_element = buf ? 20 : 12;  // p, g, buf read; p, buf written
  } else {
    const AdamHyper h{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.kind == OptimizerKind::AdamW};
    s = time_on(exec, world, [&] {
      adam_step(exec, p.data(), g.data(), m.data(), v.data(), n, make_adam_step(h, o.lr, 2, 1.0f));
    });
    out.optimizer_bytes_per_element = 28;  // p, g, m, v read; p, m, v written
  }
  out.optimizer_gbps = static_cast<double>(out.optimizer_bytes_per_element * n) / s * 1e-9;
}

// On the device's communicator backend (NCCL on CUDA, MPI on the CPU) with buffers where the
// model lives, through the link model when it is on.
void measure_collectives(const Config& config, const Device& device, const World& world,
                         std::vector<CollectiveSize> sizes, BenchLimits& out) {
  std::sort(sizes.begin(), sizes.end(), [](const CollectiveSize& a, const CollectiveSize& b) {
    return std::tie(a.op, a.bytes) < std::tie(b.op, b.bytes);
  });
  sizes.erase(std::unique(sizes.begin(), sizes.end(),
                          [](const CollectiveSize& a, const CollectiveSize& b) {
                            return a.op == b.op && a.bytes == b.bytes;
                          }),
              sizes.end());
  if (sizes.empty()) return;
  std::int64_t largest = 0;
  for (const auto& s : sizes) largest = std::max(largest, s.bytes);
  std::unique_ptr<Communicator> comm =
      device.make_communicator(world.comm, "bench.limits", comm_options(config.runtime));
  comm = with_simulated_link(std::move(comm), std::make_shared<SimulatedLink>(
                                                   config.link, config.runtime.timeout_s));
  const DeviceBuffer buf(device.kind(), largest / 4 + 1);
  out.collectives_local = world.size == 1 && !config.link.enabled();
  for (const auto& s : sizes) {
    const std::int64_t n = s.bytes / 4;
    const CollectiveOp op = s.op == "all_reduce" ? CollectiveOp::AllReduce
                            : s.op == "reduce"   ? CollectiveOp::Reduce
                                                 : CollectiveOp::Broadcast;
    const double seconds = time_collectively(world, [&] {
      switch (op) {
        case CollectiveOp::AllReduce: comm->all_reduce(buf.data(), n, ReduceOp::Sum).wait(); break;
        case CollectiveOp::Reduce: comm->reduce(buf.data(), n, 0, ReduceOp::Sum).wait(); break;
        default: comm->broadcast(buf.data(), n, 0).wait(); break;
      }
    });
    CollectiveLimit c;
    c.op = s.op;
    c.bytes = s.bytes;
    c.seconds = seconds;
    c.algbw_gbps = static_cast<double>(s.bytes) / seconds * 1e-9;
    // With link.ranks the wire bytes are the modelled ranks' (Note [Link model]).
    c.busbw_gbps = static_cast<double>(wire_bytes(op, s.bytes, modelled_ranks(config.link, world.size))) /
                   seconds * 1e-9;
    out.collectives.push_back(c);
  }
}

}  // namespace

double BenchLimits::collective_seconds(const std::string& op, std::int64_t bytes) const {
  for (const auto& c : collectives) {
    if (c.op == op && c.bytes == bytes) return c.seconds;
  }
  return 0.0;
}

BenchLimits measure_limits(const Config& config, const World& world,
                           const std::vector<CollectiveSize>& sizes) {
  set_cpu_gemm_threads(config.runtime.threads);
  // The device the runs will use (the same resolution of runtime.device as the Trainer's).
  const Device device(config.runtime.device, world);
  const ExecContext exec = device.compute();
  BenchLimits out;
  out.device = device.kind();
  out.device_summary = device.summary();
  out.gemm_kernel = exec.device == DeviceKind::Cuda ? std::string("cuBLAS SGEMM (fp32, default math mode)")
                                                    : describe_cpu_gemm(cpu_gemm_info());
  out.gemm = model_gemm_shapes(config);
  for (auto& g : out.gemm) {
    measure_gemm(exec, world, g);
    out.gemm_step_s += g.count * 2.0 * static_cast<double>(g.m * g.n * g.k) / (g.gflops * 1e9);
  }
  out.gemm_step_s *= static_cast<double>(config.train.grad_accum);
  out.triad_gbps = exec.device == DeviceKind::Cuda ? measure_device_bandwidth(exec, world)
                                                   : measure_triad(world);
  measure_optimizer(config, exec, world, out);
  out.optimizer_vs_triad = out.triad_gbps > 0.0 ? out.optimizer_gbps / out.triad_gbps : 0.0;
  measure_collectives(config, device, world, sizes, out);
  return out;
}

}  // namespace zl
