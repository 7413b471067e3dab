// Fuzz target: the `latest` pointer of a checkpoint directory (runtime/checkpoint). The input is
// the pointer's content. latest_checkpoint must either throw UserError or name an existing file;
// a message may echo the content only as a bounded excerpt.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/errors.h"
#include "runtime/checkpoint/files/checkpoint_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("zl_fuzz_latest_" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::ofstream(d / "step_00000001.safetensors") << "x";
    return d;
  }();
  {
    std::ofstream out(dir / zl::kLatestPointerName, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const auto path = zl::latest_checkpoint(dir.string());
    if (!path || !fs::exists(*path)) std::abort();
  } catch (const zl::UserError& e) {
    // Bounded: the path and an excerpt of at most a few hundred bytes, whatever the content.
    if (std::string(e.what()).size() > 2048) std::abort();
  }
  return 0;
}
