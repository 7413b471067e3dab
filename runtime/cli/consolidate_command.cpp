// `zerolap consolidate CHECKPOINT OUT.safetensors [--no-optimizer] [--overwrite]`: one
// safetensors file from a sharded checkpoint (runtime/checkpoint/files/consolidate.h), written by
// rank 0 of the job. A checkpoint directory, or its `latest` pointer, stands for the checkpoint
// `latest` names, as for `inspect` and checkpoint.resume.
#include <fmt/format.h>

#include "base/standard_output.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/cli/commands.h"

namespace zl {

int run_consolidate_command(const std::string& checkpoint, const std::string& out,
                            ConsolidateState state, ExistingOutput existing, const World& world) {
  agree_on_user_errors(world, [&] {
    if (!world.is_root()) return;
    std::string path = checkpoint;
    if (const auto named = checkpoint_named_by_latest(checkpoint)) {
      path = *named;
      fmt::print("{}: latest checkpoint {}\n", checkpoint, path);
    }
    const std::size_t n = consolidate_checkpoint(path, out, state, existing);
    fmt::print("zerolap: consolidated {} -> {} ({} tensors{})\n", path, out, n,
               state == ConsolidateState::Include ? ", optimizer state included"
                                                  : ", parameters only");
    flush_standard_output();
  });
  return 0;
}

}  // namespace zl
