// `zerolap config`: the effective configuration of a command line, as canonical TOML.
#include <cstdio>
#include <exception>
#include <string>

#include "base/errors.h"
#include "base/standard_output.h"
#include "runtime/cli/commands.h"
#include "runtime/comm/startup_watchdog.h"
#include "runtime/config/config.h"

namespace zl {

// Reads files only: no MPI, no world. A script (scripts/supervise.sh) asks it where a run writes
// and whether it began from a given checkpoint, with the reader's own rules (dotted keys, inline
// tables, --set) instead of a second TOML reader of its own.
// Under a launcher (mpirun -np N zerolap config ...) every rank reads the same files: rank 0 alone
// prints the config or its error, and every rank exits with the same code.
int run_config_command(const ConfigArgs& args) {
  const bool speaks = launcher_rank() <= 0;  // -1: not launched by one
  try {
    const std::string toml = to_toml(load_config(args.path, args.overrides));
    if (speaks) write_standard_output(toml);  // a short write or a failed flush: exit 1
    return 0;
  } catch (const UserError& e) {
    if (speaks) std::fprintf(stderr, "zerolap: error: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    if (speaks) std::fprintf(stderr, "zerolap: error: %s\n", e.what());
    return kExitRuntimeFailure;
  }
}

}  // namespace zl
