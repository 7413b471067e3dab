// Batch assembly from an in-memory Dataset: gathers the sampler's indices into contiguous host
// buffers that the trainer then copies to the device. Indices are trusted to come from the
// sampler; an out-of-range one is a bug in zerolap (InternalError), not bad input.
#include "data/dataset.h"

#include <algorithm>
#include <cstdint>

#include "base/errors.h"

namespace zl {

void gather_batch(const Dataset& data, const std::int64_t* indices, std::int64_t count, float* x,
                  std::int32_t* labels, float* targets) {
  ZL_CHECK(count >= 0 && (count == 0 || indices != nullptr), "gather_batch: count {}", count);
  const bool want_labels = data.task == TaskKind::Classification && labels != nullptr;
  const bool want_targets = data.task == TaskKind::Regression && targets != nullptr;
  const std::int64_t fd = data.feature_dim;
  const std::int64_t td = data.target_dim;
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int64_t i = indices[b];
    ZL_CHECK(i >= 0 && i < data.num_samples, "gather_batch: index {} outside {} of {} samples", i,
             data.name, data.num_samples);
    if (x != nullptr) std::copy_n(data.features.data() + i * fd, fd, x + b * fd);
    if (want_labels) labels[b] = data.labels[static_cast<std::size_t>(i)];
    if (want_targets) std::copy_n(data.targets.data() + i * td, td, targets + b * td);
  }
}

}  // namespace zl
