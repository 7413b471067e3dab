// Device: runtime.device resolution, GPU binding, the compute stream and cuBLAS handle, and the
// communicator backend of a device (see device.h).
#include "runtime/comm/backends/device.h"

#include <array>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "base/errors.h"
#include "runtime/comm/backends/mpi_communicator.h"
#include "runtime/comm/timed_mpi.h"

#if defined(ZEROLAP_WITH_CUDA)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "base/cuda_check.h"
#include "runtime/comm/backends/nccl_communicator.h"
#endif

namespace zl {

#if defined(ZEROLAP_WITH_CUDA)
namespace {

// What one rank sees, as a fixed-size record for MPI_Allgather: "gpu" is the identity of the GPU
// it would use ("host|PCI bus id"), empty when it has none; "text" is the GPU's name or why none.
struct RankGpu {
  std::array<char, 160> gpu{};
  std::array<char, 160> text{};
};

void put(std::array<char, 160>& dst, const std::string& s) {
  std::strncpy(dst.data(), s.c_str(), dst.size() - 1);
}

RankGpu probe_gpu(int local_rank, int* ordinal) {
  RankGpu r;
  *ordinal = -1;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky, but leave nothing for a later check to trip on
    put(r.text, fmt::format("cudaGetDeviceCount failed: {}", cudaGetErrorString(err)));
    return r;
  }
  if (count == 0) {
    put(r.text, "no CUDA device is visible");
    return r;
  }
  const int dev = local_rank % count;
  std::array<char, 32> bus{};
  cudaDeviceProp prop{};
  const cudaError_t e1 = cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), dev);
  const cudaError_t e2 = e1 == cudaSuccess ? cudaGetDeviceProperties(&prop, dev) : e1;
  if (e2 != cudaSuccess) {
    (void)cudaGetLastError();
    put(r.text, fmt::format("CUDA device {} is not usable: {}", dev, cudaGetErrorString(e2)));
    return r;
  }
  std::array<char, MPI_MAX_PROCESSOR_NAME> host{};
  int len = 0;
  MPI_Get_processor_name(host.data(), &len);
  put(r.gpu, fmt::format("{}|{}", host.data(), bus.data()));
  put(r.text, fmt::format("GPU {} of {}, {}, bus {}", dev, count, prop.name, bus.data()));
  *ordinal = dev;
  return r;
}

// Why the job cannot use one GPU per rank, or empty when it can. Same answer on every rank.
std::string cuda_problem(const std::vector<RankGpu>& all) {
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].gpu[0] == '\0') {
      return fmt::format("rank {} has no usable GPU ({})", r, all[r].text.data());
    }
  }
  for (std::size_t a = 0; a < all.size(); ++a) {
    for (std::size_t b = a + 1; b < all.size(); ++b) {
      if (std::strcmp(all[a].gpu.data(), all[b].gpu.data()) == 0) {
        return fmt::format(
            "ranks {} and {} would share one GPU ({}); NCCL needs one GPU per rank: start at "
            "most as many ranks per node as it has GPUs",
            a, b, all[a].gpu.data());
      }
    }
  }
  return {};
}

}  // namespace
#endif  // ZEROLAP_WITH_CUDA

Device::Device(DeviceChoice choice, const World& world, double timeout_s,
               const std::string& where) {
  const std::string at = where.empty() ? std::string() : where + ": ";
#if !defined(ZEROLAP_WITH_CUDA)
  (void)world;
  (void)timeout_s;
  if (choice == DeviceChoice::Cuda) {
    throw UserError(at + "runtime.device = \"cuda\", but this zerolap was built without CUDA "
                         "(nvcc or NCCL was missing at configure time): set runtime.device = "
                         "\"cpu\" (or \"auto\"), or rebuild with -DZEROLAP_CUDA=ON");
  }
  summary_ = choice == DeviceChoice::Auto ? "device cpu (runtime.device = auto; built without CUDA)"
                                          : "device cpu (runtime.device = cpu)";
#else
  if (choice == DeviceChoice::Cpu) {
    summary_ = "device cpu (runtime.device = cpu)";
    return;
  }
  int ordinal = -1;
  const RankGpu mine = probe_gpu(world.local_rank, &ordinal);
  std::vector<RankGpu> all(static_cast<std::size_t>(world.size));
  timed_allgather(&mine, sizeof(RankGpu), MPI_BYTE, all.data(), sizeof(RankGpu), MPI_BYTE,
                  world.comm, WaitLimit{world.rank, timeout_s}, "exchanging the ranks' GPUs");
  const std::string problem = cuda_problem(all);
  const char* how = choice == DeviceChoice::Auto ? "auto" : "cuda";
  if (!problem.empty()) {
    if (choice == DeviceChoice::Cuda) {
      throw UserError(fmt::format("{}runtime.device = \"cuda\", but {}; set runtime.device = "
                                  "\"cpu\" (or \"auto\") to train on the CPU",
                                  at, problem));
    }
    summary_ = fmt::format("device cpu (runtime.device = auto: {})", problem);
    return;
  }
  ZL_CUDA_CHECK(cudaSetDevice(ordinal));
  cudaStream_t stream = nullptr;
  // Non-blocking: the compute stream must not serialise with the legacy default stream, which the
  // blocking set-up copies (base/device_memory.cu) use.
  ZL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  exec_ = ExecContext{DeviceKind::Cuda, stream, nullptr};
  ordinal_ = ordinal;
  cublasHandle_t blas = nullptr;
  ZL_CUBLAS_CHECK(cublasCreate(&blas));
  exec_.blas = blas;
  // Default math mode, never changed: TF32 is chosen per call (ExecContext::gemm_math), so fp32
  // GEMMs stay comparable with the CPU path within float rounding unless a context asks for TF32.
  ZL_CUBLAS_CHECK(cublasSetStream(blas, stream));
  summary_ = fmt::format("device cuda (runtime.device = {}: one GPU per rank on {} rank{}; rank 0 "
                         "uses {})",
                         how, world.size, world.size == 1 ? "" : "s", all[0].text.data());
#endif
}

Device::~Device() {
#if defined(ZEROLAP_WITH_CUDA)
  // Best effort and silent: a destructor must not throw, and a broken context is reported by
  // whichever checked call failed first.
  if (exec_.blas != nullptr) cublasDestroy(static_cast<cublasHandle_t>(exec_.blas));
  if (exec_.stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(exec_.stream));
#endif
}

std::unique_ptr<Communicator> Device::make_communicator(MPI_Comm parent, std::string name,
                                                        const CommOptions& options) const {
#if defined(ZEROLAP_WITH_CUDA)
  if (kind() == DeviceKind::Cuda) {
    return std::make_unique<NcclCommunicator>(parent, std::move(name), options.timeout_s, exec_);
  }
#endif
  return std::make_unique<MpiCommunicator>(parent, std::move(name), options.timeout_s,
                                           options.priority);
}

void copy_to_device_async(const ExecContext& exec, const void* host, void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  if (exec.device == DeviceKind::Cuda) {
#if defined(ZEROLAP_WITH_CUDA)
    ZL_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice,
                                  static_cast<cudaStream_t>(exec.stream)));
    return;
#else
    throw InternalError("copy_to_device_async: a CUDA context in a build without CUDA");
#endif
  }
  std::memcpy(dst, host, bytes);
}

void synchronize_stream(const ExecContext& exec) {
  if (exec.device != DeviceKind::Cuda) return;
#if defined(ZEROLAP_WITH_CUDA)
  ZL_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(exec.stream)));
#endif
}

}  // namespace zl
