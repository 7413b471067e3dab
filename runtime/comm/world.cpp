// MPI start-up and shutdown, rank facts, and the job-wide abort.
#include "runtime/comm/world.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "base/fault_stop.h"
#include "runtime/comm/startup_watchdog.h"
#include "runtime/comm/timed_mpi.h"

namespace zl {
namespace {

// Ranks with the same affinity mask share its CPUs (unbound ranks: every rank of the node has the
// node's mask); ranks with masks of their own (mpirun binds to core by default for 1-2 ranks) own
// theirs. A rank whose mask cannot be read counts as one CPU, alone.
int cpus_per_rank(MPI_Comm node_comm, int local_size) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) CPU_SET(0, &mine);
  std::vector<cpu_set_t> all(static_cast<std::size_t>(local_size));
  if (MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all.data(), sizeof(mine), MPI_BYTE,
                    node_comm) != MPI_SUCCESS) {
    return 1;
  }
  int sharing = 0;
  for (const cpu_set_t& other : all) sharing += CPU_EQUAL(&other, &mine) ? 1 : 0;
  return std::max(1, CPU_COUNT(&mine) / std::max(1, sharing));
}

// "zerolap: error: <message>" on stderr, naming this rank where `name_rank`.
void print_error(const World& world, bool name_rank, const std::string& message) {
  if (name_rank) {
    std::fprintf(stderr, "zerolap: error on rank %d of %d: %s\n", world.rank, world.size,
                 message.c_str());
  } else {
    std::fprintf(stderr, "zerolap: error: %s\n", message.c_str());
  }
  std::fflush(stderr);
}

}  // namespace

World describe_world(MPI_Comm comm) {
  World w;
  w.comm = comm;
  MPI_Comm_rank(comm, &w.rank);
  MPI_Comm_size(comm, &w.size);
  // Ranks sharing a node share memory: split by shared-memory domain to find the local rank.
  MPI_Comm node_comm = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node_comm) ==
          MPI_SUCCESS &&
      node_comm != MPI_COMM_NULL) {
    MPI_Comm_rank(node_comm, &w.local_rank);
    MPI_Comm_size(node_comm, &w.local_size);
    w.cpus_per_rank = cpus_per_rank(node_comm, w.local_size);
    MPI_Comm_free(&node_comm);
  }
  return w;
}

void set_mpi_defaults() {
  // Note [Nonblocking collective algorithms]: Open MPI's libnbc runs its default segmented chain
  // algorithms for MPI_Ireduce/MPI_Ibcast one segment per progress call, so a multi-MiB reduce
  // polled by a comm thread that backs off advances one segment per poll. Binomial trees finish in
  // log2(p) rounds (its Rabenseifner ireduce is segmented too). MPI_Iallreduce in place, or on
  // fewer than 4 ranks, is by default a binomial reduce to rank 0 and a broadcast from it: rank 0
  // copies and sums every byte while the others wait. Rabenseifner's reduce-scatter + all-gather
  // gives each rank 1/p of the sums, in log2(p) rounds (docs/bench.md, "What this shows", has the
  // figures). Every element is still summed once, by one rank, so all ranks get the same bits.
  // Only defaults: a user's own OMPI_MCA_* setting wins, and other MPI implementations ignore
  // these variables.
  setenv("OMPI_MCA_coll_libnbc_ireduce_algorithm", "2", /*overwrite=*/0);
  setenv("OMPI_MCA_coll_libnbc_ibcast_algorithm", "2", /*overwrite=*/0);
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
}

MpiSession::MpiSession(int* argc, char*** argv, double startup_timeout_s) {
  StartupWatchdog watchdog(startup_timeout_s);
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    set_mpi_defaults();
    fault_stop_point("mpi_init", launcher_rank());
    watchdog.phase("MPI_Init_thread (joining the job's other ranks)");
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    owns_mpi_ = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr,
                 "zerolap: error: the MPI library provides thread level %d, zerolap needs "
                 "MPI_THREAD_MULTIPLE (%d): rebuild or install an MPI with thread support\n",
                 provided, MPI_THREAD_MULTIPLE);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // Errors come back as codes and become exceptions (check_mpi), so the top level can abort
  // with a message naming the rank instead of MPI's default silent abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  watchdog.phase("grouping the ranks by node (MPI_Comm_split_type)");
  world_ = describe_world(MPI_COMM_WORLD);
  // Every wait from here on has its own deadline (timed_mpi.h).
  watchdog.done();
}

MpiSession::~MpiSession() {
  if (owns_mpi_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

void abort_job(const World& world, int exit_code, const std::string& message) {
  print_error(world, world.size > 1, message);
  std::fflush(stdout);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && world.size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

void check_mpi(int code, const char* expr, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw RuntimeFailure(fmt::format("MPI error on rank {} in {} ({}:{}): {}", rank, expr, file,
                                   line, std::string(text, static_cast<std::size_t>(len))));
}

void agree_on_user_errors(const World& world, const std::function<void()>& fn,
                          const double& timeout_s) {
  std::string message;
  int failed_rank = world.size;  // "nobody"
  try {
    fn();
  } catch (const UserError& e) {
    message = e.what();
    failed_rank = world.rank;
  }
  int lowest = failed_rank;
  if (world.size > 1) {
    timed_allreduce(&failed_rank, &lowest, 1, MPI_INT, MPI_MIN, world.comm,
                    WaitLimit{world.rank, timeout_s}, "the start-up check for bad input");
  }
  if (lowest == world.size) return;
  // Rank 0 reports what every rank finds (the config, the world); a message only a later rank
  // found (a node-local file) names that rank.
  if (lowest == world.rank) print_error(world, world.rank != 0, message);
  throw ReportedUserError(message.empty() ? "bad input reported by another rank" : message);
}

}  // namespace zl
