// The compute-only bench twin (runtime/comm/compute_only_communicator.h): its no-ops are ordered as
// the collectives they stand for (Communicator::no_op), after the work on their issuing stream, so
// at one rank - where a real collective changes nothing - the twin trains bitwise like the real
// run in every mode. On the CPU (the issuing thread is the stream) and on CUDA, where a no-op that
// did not wait for the compute stream would let the interleaved step run during the backward that
// writes its gradients; the CUDA case also blocks the compute stream and checks that nothing
// behind a no-op completes before it is released. CUDA cases skip where no GPU is visible.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/bf16.h"
#include "base/device_buffer.h"
#include "cuda_test_util.h"
#include "mpi_test_util.h"
#include "runtime/comm/compute_only_communicator.h"
#include "runtime/comm/backends/mpi_communicator.h"

#if defined(ZEROLAP_WITH_CUDA)
#include <cuda_runtime.h>

#include "kernels/elementwise.h"
#include "runtime/comm/backends/device.h"
#include "runtime/comm/backends/nccl_communicator.h"
#endif

using namespace zl;
using namespace zl::test;

namespace {

// The parameters' bytes after `steps` steps on one rank, with or without the compute-only twin.
std::vector<unsigned char> parameter_bytes(const std::vector<std::string>& overrides, int steps,
                                           bool compute_only) {
  TrainerOptions options = quiet_options();
  if (compute_only) {
    options.wrap_comm = [](std::unique_ptr<Communicator> c) -> std::unique_ptr<Communicator> {
      return std::make_unique<ComputeOnlyCommunicator>(std::move(c));
    };
  }
  Trainer trainer(small_config(overrides), world_of(MPI_COMM_SELF), options);
  for (int s = 0; s < steps; ++s) trainer.train_step();
  trainer.synchronize();
  const auto& store = trainer.model().store();
  const std::int64_t n = store.total_numel();
  std::vector<unsigned char> out;
  if (store.param_dtype() == DType::BF16) {
    std::vector<Bf16> bits(static_cast<std::size_t>(n));
    copy_to_host(store.params_as<Bf16>(), store.device(), bits.data(), n);
    out.resize(bits.size() * sizeof(Bf16));
    std::memcpy(out.data(), bits.data(), out.size());
  } else {
    std::vector<float> values(static_cast<std::size_t>(n));
    copy_to_host(store.data(), store.device(), values.data(), n);
    out.resize(values.size() * sizeof(float));
    std::memcpy(out.data(), values.data(), out.size());
  }
  return out;
}

// Several buckets, so the interleaved steps of early buckets run while backward is still going.
// Every mode but stage 3's, whose gathers the twin skips outright (all_gather_from: not even the
// rank's own shard lands in the gather buffer), so its forward reads other values: timing only.
void check_twin_trains_like_real(const char* device) {
  std::vector<std::vector<std::string>> runs =
      mode_overrides([](const Mode& m) { return m.stage < 3; });
  // bf16 on every device (the CPU runs it through fp32 without a bf16 matmul).
  runs.push_back({"parallel.mode=zero", "parallel.overlap=interleaved",
                  "parallel.collective=reduce_broadcast", "precision.compute=bf16",
                  "precision.reduce_dtype=bf16", "precision.master_weights=remainders"});
  for (std::vector<std::string> run : runs) {
    std::string label;  // unique per run: a repeated section name would run only once
    for (const std::string& o : run) label += (label.empty() ? "" : " ") + o;
    run.push_back("parallel.bucket_cap_mb=0.004");
    run.push_back("parallel.first_bucket_cap_mb=0.001");
    run.push_back(std::string("runtime.device=") + device);
    DYNAMIC_SECTION(device << " " << label) {
      const std::vector<unsigned char> real = parameter_bytes(run, 4, false);
      const std::vector<unsigned char> twin = parameter_bytes(run, 4, true);
      REQUIRE(real.size() == twin.size());
      CHECK(std::memcmp(real.data(), twin.data(), real.size()) == 0);
    }
  }
}

}  // namespace

TEST_CASE("compute-only no-ops complete in issue order, behind the work issued before them",
          "[compute-only]") {
  const World world = world_of(MPI_COMM_SELF);
  MpiCommunicator other(world.comm, "other", 60.0);
  ComputeOnlyCommunicator twin(std::make_unique<MpiCommunicator>(world.comm, "twin", 60.0));
  std::vector<float> buf(16, 1.0f);
  std::atomic<int> written{0};
  // A slow continuation first: the no-ops behind it must not complete before it ran.
  twin.then([&](const ExecContext&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    written = 1;
  });
  Work reduced = twin.reduce(buf.data(), 16, 0, ReduceOp::Sum);
  reduced.wait();
  CHECK(written == 1);
  // Issued from another communicator's continuation with its stream as the issuing stream (as
  // interleaved ZeRO broadcasts): behind what that continuation did before issuing it.
  Work broadcast;
  other.then([&](const ExecContext& stream) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    written = 2;
    broadcast = twin.broadcast(buf.data(), 16, 0, &stream);
  }).wait();
  Work after = twin.then([&](const ExecContext&) { CHECK(written == 2); });
  broadcast.wait();
  after.wait();
  twin.all_reduce(buf.data(), 16, ReduceOp::Sum).wait();
  twin.synchronize();
  CHECK(buf == std::vector<float>(16, 1.0f));  // nothing moved
  CHECK(twin.stats().ops == 0);
}

TEST_CASE("at one rank the compute-only twin trains bitwise like the real run in every mode",
          "[compute-only]") {
  check_twin_trains_like_real("cpu");
}

#if defined(ZEROLAP_WITH_CUDA)

TEST_CASE("CUDA: at one rank the compute-only twin trains bitwise like the real run in every mode",
          "[cuda-train][compute-only-cuda]") {
  if (!cuda_device_visible()) return;
  check_twin_trains_like_real("cuda");
}

TEST_CASE("CUDA: a compute-only no-op waits for its issuing stream, as a collective does",
          "[cuda-train][compute-only-cuda]") {
  if (!cuda_device_visible()) return;
  const World world = world_of(MPI_COMM_SELF);
  const Device device(DeviceChoice::Cuda, world);
  ComputeOnlyCommunicator twin(
      std::make_unique<NcclCommunicator>(world.comm, "comm.reduce", 30.0, device.compute()));
  const auto compute = static_cast<cudaStream_t>(device.compute().stream);
  DeviceBuffer buf(DeviceKind::Cuda, 4), ones(DeviceKind::Cuda, 4), twos(DeviceKind::Cuda, 4);
  const std::vector<float> one(4, 1.0f), two(4, 2.0f);
  copy_from_host(one.data(), ones.data(), DeviceKind::Cuda, 4);
  copy_from_host(two.data(), twos.data(), DeviceKind::Cuda, 4);

  // The compute stream is held by a host function until released (a long backward): the
  // gradient write behind it, the no-op behind that, and the step behind the no-op must wait.
  struct Blocker {
    std::atomic<bool> release{false};
    cudaStream_t stream = nullptr;
    ~Blocker() {
      release = true;
      if (stream != nullptr) cudaStreamSynchronize(stream);
    }
  } blocker;
  blocker.stream = compute;
  const cudaHostFn_t block_until_released = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  REQUIRE(cudaLaunchHostFunc(compute, block_until_released, &blocker.release) == cudaSuccess);
  add(device.compute(), ones.data(), twos.data(), buf.data(), 4);  // "backward": gradients 1 + 2
  Work reduced = twin.reduce(buf.data(), 4, 0, ReduceOp::Sum);
  Work stepped = twin.then([&](const ExecContext& stream) { scale(stream, buf.data(), 4, 2.0f); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(reduced.is_done());
  CHECK_FALSE(stepped.is_done());
  blocker.release = true;
  stepped.wait();
  CHECK(reduced.is_done());
  std::vector<float> out(4);
  copy_to_host(buf.data(), DeviceKind::Cuda, out.data(), 4);
  CHECK(out == std::vector<float>(4, 6.0f));  // the step saw the gradients: (1 + 2) * 2, not 3
  twin.synchronize();
}

#endif  // ZEROLAP_WITH_CUDA
