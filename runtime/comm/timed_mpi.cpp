// Nonblocking MPI calls completed by polling against runtime.timeout_s (see timed_mpi.h).
#include "runtime/comm/timed_mpi.h"

#include <fmt/format.h>

#include <vector>

#include "base/poll.h"
#include "runtime/comm/world.h"

namespace zl {

void poll_request(MPI_Request& request, double timeout_s,
                  const std::function<std::string()>& on_timeout) {
  poll_until(
      [&] {
        int done = 0;
        ZL_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        return done != 0;
      },
      timeout_s, on_timeout);
}

void wait_with_deadline(MPI_Request& request, const WaitLimit& limit,
                        std::string_view operation) {
  poll_request(request, limit.timeout_s, [&] {
    return fmt::format(
        "rank {}: {} did not complete within runtime.timeout_s = {} s (a peer rank died, is "
        "stopped or hangs, or runs another program)",
        limit.rank, operation, limit.timeout_s);
  });
}

void timed_barrier(MPI_Comm comm, const WaitLimit& limit, std::string_view operation) {
  MPI_Request request;
  ZL_MPI_CHECK(MPI_Ibarrier(comm, &request));
  wait_with_deadline(request, limit, operation);
}

void timed_allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                     MPI_Comm comm, const WaitLimit& limit, std::string_view operation) {
  MPI_Request request;
  ZL_MPI_CHECK(MPI_Iallreduce(send, recv, count, type, op, comm, &request));
  wait_with_deadline(request, limit, operation);
}

void timed_allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                     int recv_count, MPI_Datatype recv_type, MPI_Comm comm,
                     const WaitLimit& limit, std::string_view operation) {
  MPI_Request request;
  ZL_MPI_CHECK(MPI_Iallgather(send, send_count, send_type, recv, recv_count, recv_type, comm,
                              &request));
  wait_with_deadline(request, limit, operation);
}

void timed_allgatherv(const void* send, int send_count, MPI_Datatype type, void* recv,
                      const int* recv_counts, const int* displacements, MPI_Comm comm,
                      const WaitLimit& limit, std::string_view operation) {
  MPI_Request request;
  ZL_MPI_CHECK(MPI_Iallgatherv(send, send_count, type, recv, recv_counts, displacements, type,
                               comm, &request));
  wait_with_deadline(request, limit, operation);
}

void timed_gather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                  int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm,
                  const WaitLimit& limit, std::string_view operation) {
  MPI_Request request;
  ZL_MPI_CHECK(MPI_Igather(send, send_count, send_type, recv, recv_count, recv_type, root, comm,
                           &request));
  wait_with_deadline(request, limit, operation);
}

void timed_gatherv(const void* send, int send_count, MPI_Datatype type, void* recv,
                   const int* recv_counts, const int* displacements, int root, MPI_Comm comm,
                   const WaitLimit& limit, std::string_view operation) {
  MPI_Request request;
  ZL_MPI_CHECK(MPI_Igatherv(send, send_count, type, recv, recv_counts, displacements, type, root,
                            comm, &request));
  wait_with_deadline(request, limit, operation);
}

void timed_bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                 const WaitLimit& limit, std::string_view operation) {
  MPI_Request request;
  ZL_MPI_CHECK(MPI_Ibcast(buf, count, type, root, comm, &request));
  wait_with_deadline(request, limit, operation);
}

void timed_send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                const WaitLimit& limit, std::string_view operation) {
  MPI_Request request;
  ZL_MPI_CHECK(MPI_Isend(buf, count, type, dest, tag, comm, &request));
  wait_with_deadline(request, limit, operation);
}

void timed_recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                const WaitLimit& limit, std::string_view operation) {
  MPI_Request request;
  ZL_MPI_CHECK(MPI_Irecv(buf, count, type, source, tag, comm, &request));
  wait_with_deadline(request, limit, operation);
}

MPI_Comm timed_comm_dup(MPI_Comm comm, const WaitLimit& limit, std::string_view operation) {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request request;
  ZL_MPI_CHECK(MPI_Comm_idup(comm, &dup, &request));
  wait_with_deadline(request, limit, operation);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  return dup;
}

MPI_Comm timed_comm_split(MPI_Comm comm, int color, int key, const WaitLimit& limit,
                          std::string_view operation) {
  int size = 0;
  ZL_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<int> colors(static_cast<std::size_t>(size));
  timed_allgather(&color, 1, MPI_INT, colors.data(), 1, MPI_INT, comm, limit, operation);
  MPI_Comm part = MPI_COMM_NULL;
  ZL_MPI_CHECK(MPI_Comm_split(comm, color, key, &part));
  MPI_Comm_set_errhandler(part, MPI_ERRORS_RETURN);
  return part;
}

}  // namespace zl
