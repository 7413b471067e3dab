// Where a run writes (output.dir, checkpoint.dir), checked before any work: a directory that
// cannot be created or written (a read-only filesystem, no permission) is bad input, exit 2 naming
// the key, found at start-up rather than at the first write minutes in. A disk that fills up
// later is the machine's failure (exit 1, base/checked_write.h).
#pragma once

#include <string>

namespace zl {

// Creates `dir` (and its parents) when missing, then creates and removes a probe file in it.
// Throws UserError "<key> = '<dir>' ...: <reason> (set <key> to a writable directory)"; a
// directory too near PATH_MAX for the names a run writes in it is refused too.
void require_writable_dir(const std::string& dir, const std::string& key);

}  // namespace zl
