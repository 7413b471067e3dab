// Fuzz target: the safetensors reader (runtime/checkpoint/files/safetensors.cpp) as resume and
// `zerolap inspect` use it: open and validate, verify the CRCs, then read every tensor (F32 ones
// through read_f32 with their own shape, others as raw bytes).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/errors.h"
#include "fuzz_input.h"
#include "runtime/checkpoint/files/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  zl::fuzz::MemoryFile file(data, size);
  try {
    zl::SafetensorsReader reader(file.path());
    if (reader.has_checksums()) reader.verify_checksums();
    std::vector<unsigned char> bytes;
    for (const zl::TensorEntry& t : reader.tensors()) {
      // validate() guarantees end <= data_bytes, and the data came from an input of `size` bytes.
      if (t.end < t.begin || t.end > reader.data_bytes() || reader.data_bytes() > size) {
        __builtin_trap();
      }
      if (t.dtype == "F32") {
        std::vector<float> values(static_cast<std::size_t>(t.numel()));
        reader.read_f32(t.name, t.shape, values.data());
      } else {
        bytes.resize(t.end - t.begin);
        reader.read_data(t.begin, bytes.data(), bytes.size());
      }
    }
  } catch (const zl::UserError&) {
  }
  return 0;
}
