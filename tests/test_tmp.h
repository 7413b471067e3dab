// The per-process directories tests make under ZEROLAP_TEST_TMP are named "<what>-<pid>" (rank 0's
// pid for an MPI test), so that ctest's parallel processes never share one. A test binary whose
// every case passed removes its own at exit; a failed run keeps them to look at. Without this, a
// build directory gathered every run's (over 100 MB after a few suites).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace zl::test {

inline void remove_own_tmp_dirs() {
  namespace fs = std::filesystem;
  const std::string suffix = "-" + std::to_string(::getpid());
  std::vector<fs::path> own;
  std::error_code ec;
  for (fs::directory_iterator it(ZEROLAP_TEST_TMP, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > suffix.size() && name.ends_with(suffix)) own.push_back(it->path());
  }
  for (const fs::path& path : own) fs::remove_all(path, ec);
}

}  // namespace zl::test
