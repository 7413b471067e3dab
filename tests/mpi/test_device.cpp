// runtime.device resolution (runtime/comm/device.h) on whatever this machine has: cpu is always the CPU;
// auto is cuda exactly when every rank has a GPU of its own; cuda without one is a UserError that
// says why, the same on every rank. Runs in CPU-only and CUDA builds, with and without a GPU.
#include <catch2/catch.hpp>

#include <mpi.h>

#include <memory>

#include "base/errors.h"
#include "mpi_test_util.h"
#include "runtime/comm/device.h"
#include "runtime/comm/mpi_communicator.h"

#if defined(ZEROLAP_WITH_CUDA)
#include <cuda_runtime.h>
#endif

using namespace zl;

namespace {

// Whether every rank of `world` can have a GPU of its own on this machine (the tests' ranks all
// run on one node, so this is: local ranks <= visible devices).
bool one_gpu_per_rank(const World& world) {
#if defined(ZEROLAP_WITH_CUDA)
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  return count >= world.local_size;
#else
  (void)world;
  return false;
#endif
}

}  // namespace

TEST_CASE("runtime.device = cpu gives the CPU and MPI communicators", "[device]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const Device device(DeviceChoice::Cpu, world);
  CHECK(device.kind() == DeviceKind::Cpu);
  CHECK(device.ordinal() == -1);
  CHECK(device.compute().stream == nullptr);
  CHECK(device.compute().blas == nullptr);
  CHECK_THAT(device.summary(), Catch::Contains("device cpu"));
  auto comm = device.make_communicator(world.comm, "comm.test", CommOptions{});
  CHECK(dynamic_cast<MpiCommunicator*>(comm.get()) != nullptr);
  CHECK(comm->size() == world.size);
}

TEST_CASE("runtime.device = auto is cuda only with one GPU per rank, and says which", "[device]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const Device device(DeviceChoice::Auto, world);
  const bool gpus = one_gpu_per_rank(world);
  INFO(device.summary());
  CHECK(device.kind() == (gpus ? DeviceKind::Cuda : DeviceKind::Cpu));
  CHECK_THAT(device.summary(), Catch::Contains("runtime.device = auto"));
  if (!gpus) {
    WARN("no GPU for every rank here: only the cpu outcome of auto is checked");
  } else {
    CHECK(device.ordinal() == world.local_rank);
    CHECK(device.compute().stream != nullptr);
  }
}

TEST_CASE("runtime.device = cuda without a GPU per rank is a UserError on every rank", "[device]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  if (one_gpu_per_rank(world)) {
    WARN("every rank has a GPU here: the error of device = cuda cannot be provoked");
    return;
  }
  try {
    const Device device(DeviceChoice::Cuda, world);
    FAIL("device = cuda without a GPU per rank did not throw");
  } catch (const UserError& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("runtime.device = \"cuda\"") &&
                            Catch::Contains("runtime.device = \"cpu\""));
#if defined(ZEROLAP_WITH_CUDA)
    CHECK_THAT(message, Catch::Contains("no usable GPU") || Catch::Contains("share one GPU"));
#else
    CHECK_THAT(message, Catch::Contains("built without CUDA"));
#endif
  }
  // Every rank threw (no rank went on into a collective): the job is still in step.
  MPI_Barrier(world.comm);
}

TEST_CASE("a Trainer with runtime.device = cuda and no GPU per rank fails with a UserError",
          "[device]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  if (one_gpu_per_rank(world)) {
    WARN("every rank has a GPU here: the error of device = cuda cannot be provoked");
    return;
  }
  CHECK_THROWS_AS(Trainer(test::small_config({"runtime.device=cuda"}), world,
                          test::quiet_options()),
                  UserError);
  MPI_Barrier(world.comm);
}
