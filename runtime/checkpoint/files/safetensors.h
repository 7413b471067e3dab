// The safetensors file format (huggingface/safetensors), pure file I/O with no MPI: an 8-byte
// little-endian header length N, N bytes of JSON header {name: {dtype, shape, data_offsets}, ...,
// "__metadata__": {string: string}} padded with spaces to a multiple of 8, then the data section.
// The writer streams the data section (a checkpoint never holds all optimizer state in memory) and
// records a CRC32 per tensor and for the whole data section in __metadata__; the reader validates
// everything a corrupt, truncated or foreign file can get wrong and throws UserError naming it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace zl {

// Bytes per element of a safetensors dtype ("F32", "I64", ...); 0 when the dtype is unknown.
std::int64_t dtype_size(const std::string& dtype);

struct TensorSpec {
  std::string name;
  std::string dtype = "F32";
  std::vector<std::int64_t> shape;
  std::int64_t numel() const;  // -1 for a negative dimension or over 2^56 elements
};

// A tensor of a file's header: its spec and where its data is.
struct TensorEntry : TensorSpec {
  std::uint64_t begin = 0, end = 0;  // byte range in the data section
};

// Metadata keys the writer adds (values: 8 lowercase hex digits of zlib's crc32).
inline constexpr const char* kDataCrcKey = "crc32";                 // the whole data section
inline std::string tensor_crc_key(const std::string& tensor) { return "crc32." + tensor; }

std::string format_shape(const std::vector<std::int64_t>& shape);  // "[256, 784]"

class SafetensorsWriter {
 public:
  // Creates `path` (truncating it) and writes the header; the data of `tensors` follows in the
  // given order, contiguous. Metadata values are strings, as the format requires. Throws
  // UserError when the file cannot be created.
  SafetensorsWriter(std::string path, std::vector<TensorSpec> tensors,
                    std::map<std::string, std::string> metadata);
  // Not finished (an exception on the way): closes and removes the partial file.
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends the next bytes of the data section; one call may cover part of a tensor or several.
  void write(const void* data, std::size_t bytes);
  void write_floats(const float* data, std::int64_t count) {
    write(data, static_cast<std::size_t>(count) * sizeof(float));
  }
  // Name of the tensor the next write() continues (for checks by the caller); "" when all written.
  std::string next_tensor() const;

  // Checks every declared byte was written, fills in the CRCs, flushes and fsyncs the file, and
  // closes it. Afterwards the file is complete and durable (its directory entry is the caller's).
  void finish();

 private:
  void fail_io(const char* what);

  std::string path_;
  std::vector<TensorSpec> tensors_;
  std::vector<std::uint64_t> tensor_bytes_;
  std::vector<std::uint32_t> tensor_crc_;
  std::vector<std::uint64_t> crc_positions_;  // file offsets of each tensor's CRC placeholder
  std::uint64_t data_crc_position_ = 0;
  std::size_t current_ = 0;       // tensor being written
  std::uint64_t written_in_current_ = 0;
  std::FILE* file_ = nullptr;
  bool finished_ = false;
};

class SafetensorsReader {
 public:
  // Opens `path` and validates its structure: header length against the file size, JSON syntax,
  // every tensor's dtype, shape and data_offsets (in bounds, sized to dtype x shape, no overlaps,
  // no gaps, nothing after the last tensor). Throws UserError naming the file and the tensor.
  explicit SafetensorsReader(std::string path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }  // in data order
  const TensorEntry* find(const std::string& name) const;               // null when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::uint64_t header_bytes() const { return header_bytes_; }
  std::uint64_t data_bytes() const { return data_bytes_; }
  bool has_checksums() const { return metadata_.count(kDataCrcKey) != 0; }

  // Recomputes the CRC32 of every tensor that has a "crc32.<name>" entry and of the data section
  // ("crc32"); throws UserError naming the file and the first corrupt tensor. Reads the whole file
  // in chunks of at most 1 MiB, each starting a multiple of 1 MiB into its tensor and handed to
  // `visit` (when given) as it is read: the tensor, the chunk's byte offset in it, its bytes.
  using ChunkVisitor = std::function<void(const TensorEntry& tensor, std::uint64_t offset,
                                          const char* bytes, std::size_t size)>;
  void verify_checksums(const ChunkVisitor& visit = {}) const;

  // Reads tensor `name` as F32 of exactly `shape` into `out`. UserError (naming the file and the
  // tensor, and how to fix) when it is missing, has another dtype or another shape.
  void read_f32(const std::string& name, const std::vector<std::int64_t>& shape, float* out) const;
  // Raw bytes [begin, begin + bytes) of the data section.
  void read_data(std::uint64_t begin, void* out, std::size_t bytes) const;

 private:
  void open_and_validate();
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  int fd_ = -1;
  std::uint64_t header_bytes_ = 0;  // N, the JSON text including padding
  std::uint64_t data_bytes_ = 0;
  std::vector<TensorEntry> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace zl
