// Every mode issues exactly its collective program (Note [Collective program]): for each mode of
// all_modes(), train.grad_accum 1 and 3, on this job's world, two steps with an evaluation
// between them. Each issued collective is checked against the program's next entry of its
// communicator as it is issued (an InternalError on a mismatch); here, every entry was issued
// once per step, on every communicator.
#include <catch2/catch.hpp>

#include <string>

#include "mpi_test_util.h"
#include "runtime/config/mode.h"
#include "runtime/train/collective_program.h"

using namespace zl;
using namespace zl::test;

TEST_CASE("every mode issues exactly its collective program, in order, on every communicator",
          "[program]") {
  const World world = world_of(MPI_COMM_WORLD);
  for (const Mode& mode : all_modes()) {
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
      REQUIRE(check.entries(CommRole::Reduce) + check.entries(CommRole::Broadcast) ==
              static_cast<std::int64_t>(program.size()));
      trainer.train_step();
      trainer.evaluate();  // outside the program (stage 3 gathers for it)
      trainer.train_step();
      trainer.synchronize();
      for (const CommRole role : {CommRole::Reduce, CommRole::Broadcast}) {
        INFO(comm_role_name(role));
        CHECK(check.checked(role) == 2 * check.entries(role));
      }
    }
  }
}
