// `zerolap consolidate CHECKPOINT OUT.safetensors [--no-optimizer] [--overwrite]`: one
// safetensors file from a sharded checkpoint (runtime/checkpoint/files/consolidate.h), written by
// rank 0 of the job. A checkpoint directory, or its `latest` pointer, stands for the checkpoint
// `latest` names, as for `inspect` and checkpoint.resume.
#include <optional>

#include <fmt/format.h>

#include "base/standard_output.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/files/consolidate.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/interrupt.h"

namespace zl {

int run_consolidate_command(const std::string& checkpoint, const std::string& out,
                            ConsolidateState state, ExistingOutput existing, const World& world) {
  // Ctrl-C or SIGTERM: rank 0, the one that writes, ends at once without the partial output.
  std::optional<RemoveOnInterrupt> interrupts;
  if (world.is_root()) {
    interrupts.emplace(consolidate_temp_path(out), fmt::format("consolidate of '{}' stopped", out));
  }
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
