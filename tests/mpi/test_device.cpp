// runtime.device resolution (runtime/comm/backends/device.h) on whatever this machine has: cpu is always the CPU;
// auto is cuda exactly when every rank has a GPU of its own; cuda without one is a UserError that
// says why, the same on every rank. Runs in CPU-only and CUDA builds, with and without a GPU. And
// runtime.threads = "auto": World::cpus_per_rank.
#include <catch2/catch.hpp>

#include <mpi.h>

#include <sched.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "base/errors.h"
#include "mpi_test_util.h"
#include "runtime/comm/backends/device.h"
#include "runtime/comm/backends/mpi_communicator.h"

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
  // The message begins where the key was set, as every later check's does.
  CHECK_THROWS_WITH(Trainer(test::small_config({"runtime.device=cuda"}), world,
                            test::quiet_options()),
                    Catch::StartsWith("--set runtime.device: runtime.device = \"cuda\", but"));
  MPI_Barrier(world.comm);
}

TEST_CASE("runtime.threads = auto shares each rank's CPUs among the ranks that share them",
          "[device]") {
  // The tests' ranks run on one node. mpirun binds 1-2 ranks to a core each (masks of their own)
  // and leaves oversubscribed ranks unbound (one mask, shared).
  const World world = test::world_of(MPI_COMM_WORLD);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  REQUIRE(sched_getaffinity(0, sizeof(mine), &mine) == 0);
  std::vector<cpu_set_t> masks(static_cast<std::size_t>(world.size));
  MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, masks.data(), sizeof(mine), MPI_BYTE, world.comm);
  std::vector<int> threads(static_cast<std::size_t>(world.size));
  MPI_Allgather(&world.cpus_per_rank, 1, MPI_INT, threads.data(), 1, MPI_INT, world.comm);
  int sharing = 0, threads_on_my_cpus = 0;
  for (std::size_t r = 0; r < masks.size(); ++r) {
    if (!CPU_EQUAL(&masks[r], &mine)) continue;
    ++sharing;
    threads_on_my_cpus += threads[r];
  }
  const int cpus = CPU_COUNT(&mine);
  INFO("rank " << world.rank << ": " << cpus << " CPUs in its mask, shared by " << sharing
               << " ranks, cpus_per_rank " << world.cpus_per_rank);
  CHECK(world.cpus_per_rank >= 1);
  // Together the ranks on a mask use its CPUs without oversubscribing them (one thread each at
  // least, when there are more ranks than CPUs), and leave fewer idle than there are ranks.
  CHECK(threads_on_my_cpus <= std::max(cpus, sharing));
  CHECK(threads_on_my_cpus > cpus - sharing);
  CHECK(cpu_threads(kAutoThreads, world) == world.cpus_per_rank);
  CHECK(cpu_threads(3, world) == 3);
}
