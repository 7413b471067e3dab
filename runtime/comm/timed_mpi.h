// MPI operations outside the communicators' streams (start-up agreement, device discovery,
// checkpoints, traces, the bench's barriers and reductions) as nonblocking calls polled against a
// deadline: a peer that died, is stopped or runs another program makes them fail (RuntimeFailure
// naming the rank and the operation; the commands end the job with exit 1 through MPI_Abort)
// instead of hang. Every function is collective or matched as its blocking MPI counterpart is.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <string_view>

namespace zl {

// Who waits, and for how long (runtime.timeout_s; before a config is read, its default).
struct WaitLimit {
  int rank = 0;
  double timeout_s = 300;
};

// Polls `request` to completion (Note [Polling back-off] in base/poll.h); after timeout_s throws
// RuntimeFailure(on_timeout()). MPI_Wait would hang on a peer that died or diverged.
void poll_request(MPI_Request& request, double timeout_s,
                  const std::function<std::string()>& on_timeout);

// poll_request against `limit`, failing with "rank R: <operation> did not complete within
// runtime.timeout_s = T s ...".
void wait_with_deadline(MPI_Request& request, const WaitLimit& limit, std::string_view operation);

void timed_barrier(MPI_Comm comm, const WaitLimit& limit, std::string_view operation);
void timed_allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                     MPI_Comm comm, const WaitLimit& limit, std::string_view operation);
void timed_allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                     int recv_count, MPI_Datatype recv_type, MPI_Comm comm,
                     const WaitLimit& limit, std::string_view operation);
void timed_allgatherv(const void* send, int send_count, MPI_Datatype type, void* recv,
                      const int* recv_counts, const int* displacements, MPI_Comm comm,
                      const WaitLimit& limit, std::string_view operation);
void timed_gather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                  int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm,
                  const WaitLimit& limit, std::string_view operation);
void timed_gatherv(const void* send, int send_count, MPI_Datatype type, void* recv,
                   const int* recv_counts, const int* displacements, int root, MPI_Comm comm,
                   const WaitLimit& limit, std::string_view operation);
void timed_bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                 const WaitLimit& limit, std::string_view operation);
void timed_send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                const WaitLimit& limit, std::string_view operation);
void timed_recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                const WaitLimit& limit, std::string_view operation);
// MPI_Comm_idup: the duplicate, with errors returned as codes (as MPI_COMM_WORLD's).
MPI_Comm timed_comm_dup(MPI_Comm comm, const WaitLimit& limit, std::string_view operation);
// MPI_Comm_split (collective over `comm`), with errors returned as codes. MPI has no nonblocking
// split: a timed all-gather of the colours first makes sure every rank reached it, so a rank that
// stopped is a RuntimeFailure within the limit, not a hang in the split.
MPI_Comm timed_comm_split(MPI_Comm comm, int color, int key, const WaitLimit& limit,
                          std::string_view operation);

}  // namespace zl
