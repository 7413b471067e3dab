// Standard output as a checked output: a command's report (plan's tables, config's TOML, train's
// progress lines) that cannot be written (a full disk, /dev/full, an I/O error) fails the command
// with exit 1 and a message saying so (docs/design.md, "Errors and exit codes"), never a silent
// exit 0, as a file that cannot be written does (base/checked_write.h).
#pragma once

#include <string_view>

namespace zl {

// Flushes stdout. Throws RuntimeFailure "cannot write to standard output: <reason>" when the flush
// fails, or when an earlier write to it failed (stdio then has dropped those bytes, so the flush
// alone would succeed).
void flush_standard_output();
// Writes `text` to stdout and flushes it, as above.
void write_standard_output(std::string_view text);

}  // namespace zl
