// The compute device of one rank: resolves runtime.device (auto | cpu | cuda) the same way on
// every rank, binds this rank's GPU (local rank mod visible devices), and owns the compute stream
// and the cuBLAS handle bound to it; it also picks the communicator backend (MPI on the CPU, NCCL
// on CUDA). On the CPU every handle is null and compute() is ExecContext{}. Builds without CUDA
// (then only "cpu" exists and "cuda" is a UserError).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>

#include "base/exec_context.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/comm_options.h"
#include "runtime/comm/world.h"

namespace zl {

class Device {
 public:
  // Collective over world.comm in CUDA builds: every rank ends with the same kind (a job whose
  // ranks mixed MPI and NCCL communicators would hang). auto = cuda when every rank has a GPU of
  // its own, else cpu. device = "cuda" when some rank has none, or two ranks of a node would share
  // one (NCCL needs one GPU per rank), throws UserError on every rank, naming the cause.
  // timeout_s bounds the exchange of the ranks' GPUs (runtime.timeout_s). `where` begins those
  // messages: where runtime.device was set ("file.toml:12", "--set runtime.device"), or nothing.
  Device(DeviceChoice choice, const World& world, double timeout_s = CommOptions{}.timeout_s,
         const std::string& where = "");
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  DeviceKind kind() const { return exec_.device; }
  int ordinal() const { return ordinal_; }  // the CUDA device of this rank; -1 on the CPU
  // Where the model's forward and backward run (CUDA: the compute stream + its cuBLAS handle).
  ExecContext compute() const { return exec_; }
  // One line for rank 0's log: what was chosen and why.
  const std::string& summary() const { return summary_; }

  // A communicator of this device's backend, a collective over `parent` (construct in the same
  // order on every rank): MpiCommunicator on the CPU; on CUDA an NcclCommunicator whose
  // collectives wait (on the GPU, not the host) for work issued on the compute stream. It takes
  // options.timeout_s; options.priority applies to the MPI comm threads only (NCCL progresses on
  // the GPU and in its own proxy thread).
  std::unique_ptr<Communicator> make_communicator(MPI_Comm parent, std::string name,
                                                  const CommOptions& options) const;

 private:
  ExecContext exec_;
  int ordinal_ = -1;
  std::string summary_;
};

// dst (bytes, on exec.device) = host (bytes): on CUDA an async copy enqueued on exec.stream (from
// pageable memory CUDA stages the bytes before returning, so `host` may be reused at once); on
// the CPU a memcpy.
void copy_to_device_async(const ExecContext& exec, const void* host, void* dst, std::size_t bytes);

// Blocks until everything enqueued on exec.stream so far has completed (CPU: nothing is queued).
// No timeout: call it only once every communicator the stream may wait on is synchronized.
void synchronize_stream(const ExecContext& exec);

}  // namespace zl
