// `zerolap config`: the effective configuration of a command line, as canonical TOML.
#include <cstdio>
#include <exception>
#include <string>

#include "base/errors.h"
#include "base/standard_output.h"
#include "runtime/cli/commands.h"
#include "runtime/config/config.h"

namespace zl {

// Reads files only: no MPI, no world. A script (scripts/supervise.sh) asks it where a run writes
// and whether it began from a given checkpoint, with the reader's own rules (dotted keys, inline
// tables, --set) instead of a second TOML reader of its own.
int run_config_command(const ConfigArgs& args) {
  try {
    const std::string toml = to_toml(load_config(args.path, args.overrides));
    write_standard_output(toml);  // a short write or a failed flush: RuntimeFailure, exit 1
    return 0;
  } catch (const UserError& e) {
    std::fprintf(stderr, "zerolap: error: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zerolap: error: %s\n", e.what());
    return kExitRuntimeFailure;
  }
}

}  // namespace zl
