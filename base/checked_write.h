// Writing a whole output file (the effective config, a trace, bench results) with every step
// checked: open, write, flush (and fsync, when it must survive a crash) and close. A failure (a
// full disk, a quota, an I/O error) removes what was written, so no partial file looks complete,
// and is a RuntimeFailure (exit 1) naming the file: the input was fine, the machine could not
// take the output.
#pragma once

#include <string>
#include <string_view>

namespace zl {

// Whether a file that could not be created or written failed for want of the machine (a full disk,
// an exhausted inode table or quota, an I/O error, a process out of files or memory): a failure of
// the moment, exit 1, which a supervisor may restart once it has passed. Any other reason (a
// missing or read-only directory, no permission, a name too long) is the configuration's, exit 2.
bool is_failure_of_the_moment(int error);

// Writes `text` to `path` (replacing it). `what` names it in messages ("the effective config").
// Throws RuntimeFailure "cannot write <what> '<path>': <reason>".
void write_whole_file(const std::string& path, std::string_view text, std::string_view what);
// As write_whole_file, and fsyncs the file before closing it: its bytes are on the disk once it
// returns, so a rename may then publish it (a checkpoint's pointer and manifest, run.json).
void write_whole_file_durably(const std::string& path, std::string_view text,
                              std::string_view what);

// The suffix of the file replace_whole_file writes before renaming it into place.
inline constexpr const char* kPartialSuffix = ".partial";
// As write_whole_file, into `path`.partial, then renamed over `path`: a reader, or a process
// ended during the write, sees the old file or the new one whole, never a part of it (a trace,
// bench results: files large enough to take seconds). A process killed meanwhile leaves the
// .partial file (claim_run_outputs removes it at the next launch into that directory).
void replace_whole_file(const std::string& path, std::string_view text, std::string_view what);

}  // namespace zl
