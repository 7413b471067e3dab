// Fuzz target: the IDX reader (data/idx_reader.cpp) on an images file and a labels file, plain or
// gzip. The input is a 4-byte little-endian split offset, the images bytes up to it and the labels
// bytes after it (an offset past the end: everything is images, labels are empty).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "base/errors.h"
#include "data/dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const std::uint32_t split = std::uint32_t{data[0]} | (std::uint32_t{data[1]} << 8) |
                              (std::uint32_t{data[2]} << 16) | (std::uint32_t{data[3]} << 24);
  const std::size_t images_bytes = std::min<std::size_t>(split, size - 4);
  zl::fuzz::MemoryFile images(data + 4, images_bytes);
  zl::fuzz::MemoryFile labels(data + 4 + images_bytes, size - 4 - images_bytes);
  try {
    const zl::Dataset set = zl::load_idx_pair(images.path(), labels.path(), "fuzz");
    // What the trainer relies on: one label per image, features sized to match.
    if (set.labels.size() != static_cast<std::size_t>(set.num_samples) ||
        set.features.size() != static_cast<std::size_t>(set.num_samples * set.feature_dim) ||
        set.num_classes < 1) {
      __builtin_trap();
    }
  } catch (const zl::UserError&) {
  }
  return 0;
}
