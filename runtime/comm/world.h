// The MPI world of one zerolap process: rank, size, and the rank's place on its node (local rank,
// used to pick a GPU). MPI is initialised once, with MPI_THREAD_MULTIPLE (each communicator's comm
// thread makes MPI calls concurrently with the others), and finalised by MpiSession's destructor.
// Started without mpirun, MPI's singleton init gives a world of 1.
#pragma once

#include <mpi.h>

#include <functional>
#include <stdexcept>
#include <string>

#include "base/errors.h"
#include "runtime/comm/comm_options.h"

namespace zl {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // rank among the ranks of this node
  int local_size = 1;
  // The CPUs this rank may run on (its affinity mask) divided by the ranks of its node that share
  // that same mask: 2 on a 2-core node for a rank alone, 1 for each of 2 ranks started with
  // `mpirun --bind-to none`, and a bound rank's own cores. At least 1. runtime.threads = "auto".
  int cpus_per_rank = 1;
  MPI_Comm comm = MPI_COMM_WORLD;

  bool is_root() const { return rank == 0; }
};

class MpiSession {
 public:
  // Initialises MPI (unless already initialised) and checks the thread level. MPI_Init and the
  // node grouping run under a StartupWatchdog of startup_timeout_s
  // (runtime/comm/startup_watchdog.h), which ends the process naming the phase.
  MpiSession(int* argc, char*** argv, double startup_timeout_s);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  const World& world() const { return world_; }

 private:
  World world_;
  bool owns_mpi_ = false;
};

// Environment defaults zerolap wants before MPI_Init (see Note [Nonblocking collective
// algorithms] in world.cpp). MpiSession calls it; so must any other main that initialises MPI.
void set_mpi_defaults();

// The world of an already initialised MPI (tests, MpiSession).
World describe_world(MPI_Comm comm = MPI_COMM_WORLD);

// CPU GEMM threads per rank: `requested` (runtime.threads), or world.cpus_per_rank where it is
// kAutoThreads (runtime/comm/comm_options.h).
inline int cpu_threads(int requested, const World& world) {
  return requested == kAutoThreads ? world.cpus_per_rank : requested;
}

// Ends the whole job: prints `message` prefixed with the rank, then MPI_Abort(exit_code) so no
// other rank is left waiting in a collective. Safe to call from any thread.
[[noreturn]] void abort_job(const World& world, int exit_code, const std::string& message);

// Throws RuntimeFailure naming the MPI call, its error string, file:line and rank.
void check_mpi(int code, const char* expr, const char* file, int line);
#define ZL_MPI_CHECK(expr) ::zl::check_mpi((expr), #expr, __FILE__, __LINE__)

// Bad input that has already been reported (by the lowest rank that saw it): every rank ends with
// exit code 2 through a clean MPI_Finalize rather than MPI_Abort.
class ReportedUserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `fn` on every rank (collective). If it throws UserError on any rank, the lowest failing
// rank prints its message and every rank throws ReportedUserError — so a bad config or a missing
// data file ends the whole job with one message and exit code 2, and no rank is left waiting.
// The exchange waits at most `timeout_s` (a stopped peer: RuntimeFailure naming the rank, exit 1),
// read after fn returns, so fn may be what sets it: `agree_on_user_errors(world, [&] { config =
// load_config(...); }, config.runtime.timeout_s)` waits as the loaded config says, or the
// default where this rank could not load it. Without `timeout_s`: the default runtime.timeout_s
// (300 s).
void agree_on_user_errors(const World& world, const std::function<void()>& fn,
                          const double& timeout_s = CommOptions{}.timeout_s);

// Runs `fn` and ends the whole job where a failure is caught (UserError: exit 2, anything else:
// exit 1), *before* the caller's objects are destroyed: a Trainer's destructor would otherwise
// wait for collectives that a failed peer never completes. Call it with the Trainer owned by the
// calling frame, outside `fn`. ReportedUserError (every rank agreed) passes through.
template <typename Fn>
decltype(auto) run_or_abort(const World& world, Fn&& fn) {
  try {
    return fn();
  } catch (const ReportedUserError&) {
    throw;
  } catch (const UserError& e) {
    abort_job(world, 2, e.what());
  } catch (const std::exception& e) {
    abort_job(world, 1, e.what());
  }
}

}  // namespace zl
