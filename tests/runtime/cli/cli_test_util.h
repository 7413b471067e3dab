// Runs the built `zerolap` executable (ZEROLAP_BINARY) with arguments and captures its exit code
// and combined output, for the end-to-end CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

namespace zl::test {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// The exit code and output of a shell command line.
inline CliResult run_shell(const std::string& command) {
  CliResult r;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe)) r.output += buf.data();
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// `prefix` goes before the binary: "timeout -k 5 60" bounds a case (a hang is exit 124).
inline CliResult run_zerolap(const std::string& args, const std::string& prefix = "") {
  return run_shell(prefix + " " + std::string(ZEROLAP_BINARY) + " " + args + " 2>&1");
}

// run_zerolap with the command's stdout sent to `path` (a file, or a device such as /dev/full):
// the output is its stderr alone.
inline CliResult run_zerolap_stdout_to(const std::string& args, const std::string& path) {
  return run_shell(std::string(ZEROLAP_BINARY) + " " + args + " 2>&1 >" + path);
}

// run_zerolap bounded by `seconds`: a hang is exit 124, a crash 128 + its signal.
inline CliResult run_zerolap_bounded(const std::string& args, int seconds = 120) {
  return run_zerolap(args, "timeout -k 5 " + std::to_string(seconds));
}

}  // namespace zl::test
