// Where a run writes (output.dir, checkpoint.dir), checked before any work: a directory that
// cannot be created or written (a read-only filesystem, no permission) is bad input, exit 2 naming
// the key, found at start-up rather than at the first write minutes in. A disk that fills up
// later is the machine's failure (exit 1, base/checked_write.h).
#pragma once

#include <cstddef>
#include <string>

namespace zl {

// At least the longest path, relative to output.dir or checkpoint.dir, of a file a run writes
// there; the probe file is named that long (require_writable_dir), so a directory within this
// many characters of PATH_MAX is refused.
inline constexpr std::size_t kLongestNameBelow = 80;

// Creates `dir` (and its parents) when missing, then creates and removes a probe file in it.
// Throws UserError "<key> = '<dir>' ...: <reason> (set <key> to a writable directory)".
void require_writable_dir(const std::string& dir, const std::string& key);

}  // namespace zl
