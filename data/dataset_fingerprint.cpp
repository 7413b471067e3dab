// dataset_fingerprint (see dataset_fingerprint.h).
#include "data/dataset_fingerprint.h"

#include <fmt/format.h>

#include <cstring>

namespace zl {

std::uint64_t checksum_bytes(const void* data, std::size_t bytes) {
  // 8 bytes per multiply: a 188 MB image set hashes in well under a second, where a byte-wise
  // FNV-1a would take several. Any change of a byte changes the word it is in, and the
  // multiply-rotate carries it into every later state.
  constexpr std::uint64_t kPrime = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = 0xCBF29CE484222325ull ^ bytes;
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = ((h ^ word) * kPrime);
    h ^= h >> 29;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, p + i, bytes - i);
  h = (h ^ tail) * kPrime;
  return h ^ (h >> 32);
}

DatasetFingerprint dataset_fingerprint(const Dataset& data) {
  DatasetFingerprint f;
  f.inputs = fmt::format("{} samples x {} features, checksum {:016x}", data.num_samples,
                         data.feature_dim,
                         checksum_bytes(data.features.data(), data.features.size() * sizeof(float)));
  if (data.task == TaskKind::Classification) {
    f.outputs = fmt::format(
        "{} labels of {} classes, checksum {:016x}", data.labels.size(), data.num_classes,
        checksum_bytes(data.labels.data(), data.labels.size() * sizeof(std::int32_t)));
  } else {
    f.outputs = fmt::format(
        "{} targets x {}, checksum {:016x}", data.num_samples, data.target_dim,
        checksum_bytes(data.targets.data(), data.targets.size() * sizeof(float)));
  }
  return f;
}

}  // namespace zl
