// BatchLoader: gathers one batch of a dataset into host buffers and puts it where the model reads
// it - the host buffers themselves on the CPU; on CUDA device copies enqueued on the compute
// stream, ordered after the previous batch's use. Training and evaluation share one loader.
#pragma once

#include <cstdint>
#include <vector>

#include "base/device_buffer.h"
#include "base/exec_context.h"
#include "data/dataset.h"

namespace zl {

// A batch where the model reads it: inputs, and labels (classification) or targets (regression).
struct DeviceBatch {
  float* x = nullptr;
  const std::int32_t* labels = nullptr;
  const float* targets = nullptr;
};

class BatchLoader {
 public:
  explicit BatchLoader(ExecContext compute) : compute_(compute) {}

  // Gathers samples `indices` of `data` into the host buffers.
  void gather(const Dataset& data, const std::vector<std::int64_t>& indices);
  // The gathered inputs on the host (a test hook may change them before upload()).
  float* host_inputs() { return host_x_.data(); }
  // The gathered batch where the model reads it (classification: labels; else targets).
  DeviceBatch upload(TaskKind task);

 private:
  ExecContext compute_;
  std::vector<float> host_x_, host_targets_;
  std::vector<std::int32_t> host_labels_;
  DeviceBuffer device_x_, device_targets_, device_labels_;  // used when the model is on a GPU
};

}  // namespace zl
