// A stand-in for libFuzzer's driver in builds without it (gcc, no ZEROLAP_FUZZ): runs a fuzz
// target once on every file of the given files or directories, so the corpus and each past
// crasher (tests/fuzz/corpus/<target>/) are a regression test of the normal suite.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

int run_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return 1;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::printf("replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
  std::fflush(stdout);  // a crash in the target leaves the name of the input in the log
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int files = 0, failures = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::vector<std::filesystem::path> paths;
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) paths.push_back(entry.path());
      }
    } else {
      paths.push_back(arg);
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
      failures += run_file(p);
      ++files;
    }
  }
  if (files == 0) {
    std::fprintf(stderr, "replay: no input files\n");
    return 1;
  }
  std::printf("replay: %d inputs, %d unreadable\n", files, failures);
  return failures == 0 ? 0 : 1;
}
