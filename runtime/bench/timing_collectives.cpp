// aligned_barrier and max_over_ranks (see timing_collectives.h).
#include "runtime/bench/timing_collectives.h"

namespace zl {

void aligned_barrier(const World& world, const WaitLimit& limit) {
  timed_barrier(world.comm, limit, "the bench's barrier");
  timed_barrier(world.comm, limit, "the bench's aligning barrier");
}

void max_over_ranks(const World& world, const WaitLimit& limit, std::span<double> values) {
  timed_allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                  MPI_MAX, world.comm, limit, "the bench's max over ranks");
}

double max_over_ranks(const World& world, const WaitLimit& limit, double value) {
  max_over_ranks(world, limit, std::span<double>(&value, 1));
  return value;
}

}  // namespace zl
