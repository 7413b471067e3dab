// The simulated link on CUDA (Note [Link on the device], runtime/comm/link/simulated_link.h), on
// one rank with link.ranks = 8: a collective completes on its stream no earlier than the modelled
// time, the rank's two comm streams queue for one link, work ordered after a collective by an event
// waits for the link too, and training gives bitwise the parameters it gives without the link.
// Timing: no earlier than modelled, and - from the GPU's own events, so no host noise - no later
// than 1.1x modelled + 50 us, which holds only where %globaltimer ticks finely enough for the
// modelled link to be honest; each case prints its ratio (GPU_LINK lines). Built with CUDA; skips
// where no GPU is visible.
#include <catch2/catch.hpp>

#include "cuda_test_util.h"

#if defined(ZEROLAP_WITH_CUDA)

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/device_buffer.h"
#include "kernels/elementwise.h"
#include "mpi_test_util.h"
#include "runtime/comm/backends/device.h"
#include "runtime/comm/backends/nccl_communicator.h"
#include "runtime/comm/link/simulated_link.h"

using namespace zl;
using namespace zl::test;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The delay kernels' accuracy: busy (GPU event time) within [modelled, 1.1 modelled + 50 us].
void check_link_time(const char* what, double busy_s, double modelled_s) {
  std::printf("GPU_LINK %s: modelled %.3f ms, busy %.3f ms (%.4fx)\n", what, modelled_s * 1e3,
              busy_s * 1e3, busy_s / modelled_s);
  INFO(what << ": busy " << busy_s << " s, modelled " << modelled_s << " s");
  CHECK(busy_s >= modelled_s * 0.99);
  CHECK(busy_s <= modelled_s * 1.1 + 50e-6);
}

std::vector<float> parameters_after(std::vector<std::string> overrides, int steps) {
  overrides.push_back("runtime.device=cuda");
  Trainer trainer(small_config(overrides), world_of(MPI_COMM_SELF), quiet_options());
  for (int s = 0; s < steps; ++s) trainer.train_step();
  trainer.synchronize();
  const auto& store = trainer.model().store();
  std::vector<float> out(static_cast<std::size_t>(store.total_numel()));
  copy_to_host(store.data(), store.device(), out.data(), store.total_numel());
  return out;
}

}  // namespace

TEST_CASE("the simulated link on a CUDA stream delays completion to the modelled time",
          "[cuda-train][cuda-link]") {
  if (!cuda_device_visible()) return;
  const World world = world_of(MPI_COMM_SELF);
  const Device device(DeviceChoice::Cuda, world);
  LinkConfig config;
  config.bandwidth_gbps = 1.0;  // 1 MiB as one of 8 ranks: 2 * 7/8 * 8.4 ms = 14.7 ms
  config.ranks = 8;
  auto link = std::make_shared<SimulatedLink>(config);
  std::unique_ptr<Communicator> reduce =
      with_simulated_link(device.make_communicator(world.comm, "comm.reduce", CommOptions{}), link,
                          flat_link_span(config, world.size));
  std::unique_ptr<Communicator> bcast =
      with_simulated_link(device.make_communicator(world.comm, "comm.broadcast", CommOptions{}),
                          link, flat_link_span(config, world.size));
  const std::int64_t n = 1 << 18;
  const double all_reduce_s = modelled_seconds(config, CollectiveOp::AllReduce, n * 4, 1);
  const double broadcast_s = modelled_seconds(config, CollectiveOp::Broadcast, n * 4, 1);
  REQUIRE(all_reduce_s > 0.01);

  std::vector<float> host(static_cast<std::size_t>(n), 3.0f);
  DeviceBuffer a(DeviceKind::Cuda, n), b(DeviceKind::Cuda, n);
  copy_from_host(host.data(), a.data(), DeviceKind::Cuda, n);
  copy_from_host(host.data(), b.data(), DeviceKind::Cuda, n);
  synchronize_stream(device.compute());

  SECTION("one collective; work after it by an event waits for the link") {
    const auto start = std::chrono::steady_clock::now();
    Work w = reduce->all_reduce(a.data(), n, ReduceOp::Sum);
    w.stream_wait(device.compute());
    scale(device.compute(), a.data(), n, 2.0f);
    synchronize_stream(device.compute());
    CHECK(seconds_since(start) >= all_reduce_s);
    CHECK(w.is_done());
    std::vector<float> out(host.size());
    copy_to_host(a.data(), DeviceKind::Cuda, out.data(), n);
    CHECK(out.front() == 6.0f);  // one rank: the sum is the value; then scaled on the compute stream
    CHECK(out.back() == 6.0f);
    const CommStats s = reduce->stats();
    check_link_time("all_reduce", s.busy_seconds, all_reduce_s);  // GPU events around the delay
    CHECK(s.wire_bytes == wire_bytes(CollectiveOp::AllReduce, n * 4, 8));
  }
  SECTION("the two comm streams of a rank share the link") {
    const auto start = std::chrono::steady_clock::now();
    Work x = reduce->all_reduce(a.data(), n, ReduceOp::Sum);
    Work y = bcast->broadcast(b.data(), n, 0);
    x.wait();
    y.wait();
    CHECK(seconds_since(start) >= all_reduce_s + broadcast_s);
    check_link_time("all_reduce first on the shared link", reduce->stats().busy_seconds,
                    all_reduce_s);
    // The broadcast's stream was idle when it was issued: its busy time includes its wait for
    // the link behind the all-reduce.
    check_link_time("broadcast queued behind it", bcast->stats().busy_seconds,
                    all_reduce_s + broadcast_s);
  }
  reduce->synchronize();
  bcast->synchronize();
}

TEST_CASE("training on CUDA with link.ranks = 8 gives bitwise the parameters it gives without",
          "[cuda-train][cuda-link]") {
  if (!cuda_device_visible()) return;
  for (const char* overlap : {"none", "after_backward", "interleaved"}) {
    DYNAMIC_SECTION(overlap) {
      const std::vector<std::string> base = {
          "parallel.mode=zero", std::string("parallel.overlap=") + overlap,
          "parallel.collective=reduce_broadcast", "parallel.bucket_cap_mb=0.004",
          "parallel.first_bucket_cap_mb=0.001"};
      std::vector<std::string> linked = base;
      linked.push_back("link.ranks=8");
      linked.push_back("link.bandwidth_gbps=2");
      linked.push_back("link.latency_us=20");
      const std::vector<float> plain = parameters_after(base, 4);
      const std::vector<float> modelled = parameters_after(linked, 4);
      REQUIRE(plain.size() == modelled.size());
      CHECK(std::memcmp(plain.data(), modelled.data(), plain.size() * sizeof(float)) == 0);
    }
  }
}

#else

TEST_CASE("CUDA link tests are not built", "[cuda-train][cuda-link]") {
  WARN("built without CUDA (ZEROLAP_CUDA=OFF or nvcc not found): CUDA link tests skipped");
}

#endif  // ZEROLAP_WITH_CUDA
