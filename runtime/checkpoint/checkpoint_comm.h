// CheckpointComm: the checkpoint code's own duplicate of the world communicator, so that its
// collectives never interleave with training's. Collective to create and free.
#pragma once

#include <mpi.h>

#include "runtime/comm/timed_mpi.h"

namespace zl {

// Made for one single-file save or load, or held by the CheckpointSaver for a run's sharded
// saves. Every wait on it is bounded by runtime.timeout_s (runtime/comm/timed_mpi.h).
class CheckpointComm {
 public:
  CheckpointComm(MPI_Comm world, const WaitLimit& limit) : limit_(limit) {
    comm_ = timed_comm_dup(world, limit_, "creating the checkpoint communicator");
  }
  ~CheckpointComm() { MPI_Comm_free(&comm_); }
  CheckpointComm(const CheckpointComm&) = delete;
  CheckpointComm& operator=(const CheckpointComm&) = delete;
  MPI_Comm get() const { return comm_; }
  const WaitLimit& limit() const { return limit_; }

 private:
  WaitLimit limit_;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace zl
