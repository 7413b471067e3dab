// A dataset's fingerprint: its shape and a 64-bit checksum of its contents as loaded (after
// decompression and scaling; for generated sets, of what the generator made). Two ranks that
// hold the same data have the same fingerprint; ranks compare them at start-up.
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.h"

namespace zl {

struct DatasetFingerprint {
  std::string inputs;   // "60000 samples x 784 features, checksum 0123456789abcdef"
  std::string outputs;  // "60000 labels of 10 classes, checksum ..." or "... targets x 3, ..."
};

DatasetFingerprint dataset_fingerprint(const Dataset& data);

// The checksum itself: a word-at-a-time 64-bit hash (not cryptographic) of `bytes` bytes.
std::uint64_t checksum_bytes(const void* data, std::size_t bytes);

}  // namespace zl
