// BatchLoader: host gather and device upload of one batch (see batch_loader.h).
#include "runtime/train/run/batch_loader.h"

#include <algorithm>

#include "runtime/comm/backends/device.h"

namespace zl {

void BatchLoader::gather(const Dataset& data, const std::vector<std::int64_t>& indices) {
  const auto batch = static_cast<std::int64_t>(indices.size());
  const bool classification = data.task == TaskKind::Classification;
  host_x_.resize(static_cast<std::size_t>(batch * data.feature_dim));
  if (classification) {
    host_labels_.resize(static_cast<std::size_t>(batch));
  } else {
    host_targets_.resize(
        static_cast<std::size_t>(batch * std::max<std::int64_t>(1, data.target_dim)));
  }
  gather_batch(data, indices.data(), batch, host_x_.data(),
               classification ? host_labels_.data() : nullptr,
               classification ? nullptr : host_targets_.data());
}

DeviceBatch BatchLoader::upload(TaskKind task) {
  const bool classification = task == TaskKind::Classification;
  if (compute_.device == DeviceKind::Cpu) {
    return DeviceBatch{
        .x = host_x_.data(), .labels = host_labels_.data(), .targets = host_targets_.data()};
  }
  // Device buffers grow only for a batch larger than any before (the first step, the first
  // evaluation): allocating synchronises the device, which the steady-state step never does.
  // Reusing them is safe: each copy is stream-ordered after the previous batch's kernels.
  auto copy = [this](DeviceBuffer& dst, const void* host, std::size_t count) {
    if (dst.size() < static_cast<std::int64_t>(count)) {
      dst = DeviceBuffer(compute_.device, static_cast<std::int64_t>(count));
    }
    copy_to_device_async(compute_, host, dst.data(), count * sizeof(float));
  };
  static_assert(sizeof(std::int32_t) == sizeof(float), "labels travel in a float-sized buffer");
  copy(device_x_, host_x_.data(), host_x_.size());
  DeviceBatch b{.x = device_x_.data()};
  if (classification) {
    copy(device_labels_, host_labels_.data(), host_labels_.size());
    b.labels = reinterpret_cast<const std::int32_t*>(device_labels_.data());
  } else {
    copy(device_targets_, host_targets_.data(), host_targets_.size());
    b.targets = device_targets_.data();
  }
  return b;
}

}  // namespace zl
