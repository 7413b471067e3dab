// Every mode issues exactly its collective program (Note [Collective program]): for each mode of
// all_modes() - with hybrid sharding at each shard group that divides this job's world below it -
// train.grad_accum 1 and 3, on this job's world, two steps with an evaluation between them. Each issued collective is checked against the program's next entry of its
// communicator as it is issued (an InternalError on a mismatch); here, every entry was issued
// once per step, on every communicator.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "mpi_test_util.h"
#include "runtime/config/mode.h"
#include "runtime/train/plan/collective_program.h"

using namespace zl;
using namespace zl::test;

TEST_CASE("every mode issues exactly its collective program, in order, on every communicator",
          "[program]") {
  const World world = world_of(MPI_COMM_WORLD);
  std::vector<int> groups;  // hybrid sharding: the replica communicator joins the program
  for (int g = 1; g < world.size; ++g) {
    if (world.size % g == 0) groups.push_back(g);
  }
  for (const Mode& mode : all_modes(groups)) {
    for (const int accum : {1, 3}) {
      INFO(mode.name() << " grad_accum " << accum << " on " << world.size << " ranks");
      Config config = small_config({"parallel.bucket_cap_mb=0.002",
                                    "parallel.first_bucket_cap_mb=0.0005",
                                    "train.grad_accum=" + std::to_string(accum)});
      set_mode(config.parallel, mode);
      Trainer trainer(config, world, quiet_options());
      REQUIRE(trainer.plan().buckets.size() >= 3);  // the interleaved tail reorders the last two
      const std::vector<ProgramEntry> program =
          collective_program(trainer.mode_plan(), trainer.plan());
      const ProgramCheck& check = trainer.program_check();
      REQUIRE(check.entries(CommRole::Reduce) + check.entries(CommRole::Broadcast) +
                  check.entries(CommRole::Replica) ==
              static_cast<std::int64_t>(program.size()));
      // Hybrid sharding: one all-reduce of each bucket's shard across the replicas per step,
      // whatever grad_accum (not one per micro-batch).
      const auto buckets = static_cast<std::int64_t>(trainer.plan().buckets.size());
      CHECK(check.entries(CommRole::Replica) == (mode.shard_group > 0 ? buckets : 0));
      trainer.train_step();
      trainer.evaluate();  // outside the program (stage 3 gathers for it)
      trainer.train_step();
      trainer.synchronize();
      for (const CommRole role : {CommRole::Reduce, CommRole::Broadcast, CommRole::Replica}) {
        INFO(comm_role_name(role));
        CHECK(check.checked(role) == 2 * check.entries(role));
      }
    }
  }
}

// A model of one Linear layer: no bucket is read in backward, and with one bucket that bucket is
// both the last forward reads and the first the next micro-batch's forward reads, so it stays
// gathered between micro-batches; split into buckets (its weight and bias apart), the first
// forward reads is released by forward and gathered again.
TEST_CASE("stage 3 on one Linear layer issues its program over micro-batches", "[program]") {
  const World world = world_of(MPI_COMM_WORLD);
  std::vector<int> groups;
  for (int g = 1; g < world.size; ++g) {
    if (world.size % g == 0) groups.push_back(g);
  }
  for (const Mode& mode : all_modes(groups)) {
    if (mode.stage != 3) continue;
    for (const char* cap : {"25.0", "0.00005"}) {
      INFO(mode.name() << " bucket_cap_mb " << cap << " on " << world.size << " ranks");
      Config config = small_config({"model.widths=[4, 3]", "train.grad_accum=3",
                                    std::string("parallel.bucket_cap_mb=") + cap,
                                    std::string("parallel.first_bucket_cap_mb=") + cap});
      set_mode(config.parallel, mode);
      Trainer trainer(config, world, quiet_options());
      const ProgramCheck& check = trainer.program_check();
      trainer.train_step();
      trainer.train_step();
      trainer.synchronize();
      CHECK(check.checked(CommRole::Broadcast) == 2 * check.entries(CommRole::Broadcast));
    }
  }
}
