// SafetensorsWriter and SafetensorsReader (see safetensors.h). Little-endian hosts only: the data
// section is the in-memory bytes, as the format specifies little-endian.
#include "runtime/checkpoint/files/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>  // crc32_combine

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/checked_write.h"
#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/files/crc32.h"

namespace zl {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; zerolap writes host memory as it is");

namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;  // the limit of the reference reader
constexpr std::size_t kChunkBytes = 1 << 20;
constexpr const char* kCrcPlaceholder = "00000000";

}  // namespace

std::int64_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, std::int64_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},   {"I8", 1},   {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2},  {"F16", 2},  {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4},  {"I64", 8},  {"U64", 8},     {"F64", 8}};
  const auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

std::int64_t TensorSpec::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (std::int64_t{1} << 56) / d)) return -1;
    n *= d;
  }
  return n;
}

std::string format_shape(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// --- writer ------------------------------------------------------------------------------------

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<TensorSpec> tensors,
                                     std::map<std::string, std::string> metadata)
    : path_(std::move(path)), tensors_(std::move(tensors)) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const TensorSpec& t : tensors_) {
    const std::int64_t size = dtype_size(t.dtype);
    ZL_CHECK(size > 0 && t.numel() >= 0, "tensor {}: dtype {} shape {}", t.name, t.dtype,
             format_shape(t.shape));
    ZL_CHECK(t.name != "__metadata__" && !header.contains(t.name), "tensor name {}", t.name);
    const auto bytes = static_cast<std::uint64_t>(t.numel() * size);
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    tensor_bytes_.push_back(bytes);
    offset += bytes;
    metadata[tensor_crc_key(t.name)] = kCrcPlaceholder;
  }
  metadata[kDataCrcKey] = kCrcPlaceholder;
  header["__metadata__"] = metadata;
  tensor_crc_.assign(tensors_.size(), 0u);

  std::string text = header.dump();
  // Pad with spaces (allowed by the format) so the data section starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  // The CRC placeholders are patched in place by finish(); their positions in the JSON text are
  // unique because a quoted key followed by ':' occurs only as that key.
  auto placeholder_at = [&](const std::string& key) {
    const std::string pattern = nlohmann::json(key).dump() + ":\"" + kCrcPlaceholder + "\"";
    const std::size_t pos = text.find(pattern);
    ZL_CHECK(pos != std::string::npos, "placeholder of {}", key);
    return 8 + pos + pattern.size() - 1 - std::strlen(kCrcPlaceholder);
  };
  for (const TensorSpec& t : tensors_) {
    crc_positions_.push_back(placeholder_at(tensor_crc_key(t.name)));
  }
  data_crc_position_ = placeholder_at(kDataCrcKey);

  file_ = open_for_writing(path_, "wb", "checkpoint file");
  if (!file_) {
    const int err = errno;
    // A full disk or inode table is a failure of the moment, as it is when the data is written
    // (exit 1); anything else (a missing or read-only directory, a name too long) is the
    // configuration's (exit 2).
    if (is_failure_of_the_moment(err)) {
      throw RuntimeFailure(fmt::format("cannot create checkpoint file '{}': {}", path_,
                                       std::strerror(err)));
    }
    throw UserError(fmt::format("cannot create checkpoint file '{}': {} (check that its "
                                "directory exists and is writable)",
                                path_, std::strerror(err)));
  }
  std::uint8_t length[8];
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<std::uint8_t>(n >> (8 * i));
  if (std::fwrite(length, 1, 8, file_) != 8 || std::fwrite(text.data(), 1, n, file_) != n) {
    const int err = errno;  // a constructor that throws runs no destructor: clean up here
    std::fclose(file_);
    file_ = nullptr;
    std::error_code ec;
    std::filesystem::remove(path_, ec);
    errno = err;
    fail_io("write the header of");
  }
  while (current_ < tensors_.size() && tensor_bytes_[current_] == 0) ++current_;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_) std::fclose(file_);
  if (!finished_) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);  // best effort: a partial file must never look complete
  }
}

void SafetensorsWriter::fail_io(const char* what) {
  const std::string reason = std::strerror(errno);
  throw RuntimeFailure(fmt::format("cannot {} checkpoint file '{}': {} (disk full?)", what, path_,
                                   reason));
}

std::string SafetensorsWriter::next_tensor() const {
  return current_ < tensors_.size() ? tensors_[current_].name : std::string();
}

void SafetensorsWriter::write(const void* data, std::size_t bytes) {
  ZL_CHECK(file_ && !finished_, "write after finish to {}", path_);
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (bytes > 0) {
    ZL_CHECK(current_ < tensors_.size(), "{}: {} bytes written past the last tensor", path_, bytes);
    const std::uint64_t left = tensor_bytes_[current_] - written_in_current_;
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, bytes));
    if (std::fwrite(p, 1, n, file_) != n) fail_io("write");
    tensor_crc_[current_] = crc32_update(tensor_crc_[current_], p, n);
    written_in_current_ += n;
    p += n;
    bytes -= n;
    if (written_in_current_ == tensor_bytes_[current_]) {
      written_in_current_ = 0;
      do ++current_;
      while (current_ < tensors_.size() && tensor_bytes_[current_] == 0);
    }
  }
}

void SafetensorsWriter::finish() {
  ZL_CHECK(file_ && !finished_, "finish twice on {}", path_);
  ZL_CHECK(current_ == tensors_.size(), "{}: finished before tensor {} was written", path_,
           next_tensor());
  auto patch = [&](std::uint64_t position, std::uint32_t crc) {
    const std::string hex = crc_hex(crc);
    if (fseeko(file_, static_cast<off_t>(position), SEEK_SET) != 0 ||
        std::fwrite(hex.data(), 1, hex.size(), file_) != hex.size()) {
      fail_io("write the checksums of");
    }
  };
  // The data section is the tensors' data back to back, so its CRC follows from theirs: every
  // byte goes through crc32 once.
  auto data_crc = std::uint32_t{0};
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    patch(crc_positions_[i], tensor_crc_[i]);
    data_crc = static_cast<std::uint32_t>(
        crc32_combine(data_crc, tensor_crc_[i], static_cast<z_off_t>(tensor_bytes_[i])));
  }
  patch(data_crc_position_, data_crc);
  // fflush moves the bytes to the kernel, fsync to the disk: only then may the file be renamed
  // into place (a rename of an unsynced file can survive a power loss with empty contents).
  if (std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0) fail_io("flush");
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) fail_io("close");
  finished_ = true;
}

// --- reader ------------------------------------------------------------------------------------

void SafetensorsReader::fail(const std::string& what) const {
  throw UserError(fmt::format("checkpoint file '{}': {}", path_, what));
}

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)) {
  try {
    open_and_validate();
  } catch (...) {  // a constructor that throws runs no destructor
    if (fd_ >= 0) ::close(fd_);
    throw;
  }
}

void SafetensorsReader::open_and_validate() {
  // O_NONBLOCK: a FIFO named as a checkpoint opens at once (and is refused below) instead of
  // waiting forever for a writer; the flag is cleared for the reads of a regular file.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) fail(fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail(fmt::format("cannot stat: {}", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) {
    fail(fmt::format("not a regular file (it is {})", file_type_name(st.st_mode)));
  }
  if (const int flags = ::fcntl(fd_, F_GETFL); flags >= 0) {
    ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  }
  const auto file_bytes = static_cast<std::uint64_t>(st.st_size);
  if (file_bytes < 8) {
    fail(fmt::format("truncated: {} bytes, shorter than the 8-byte header length of a "
                     "safetensors file", file_bytes));
  }
  std::uint8_t length[8];
  if (::pread(fd_, length, 8, 0) != 8) fail("cannot read the header length");
  for (int i = 0; i < 8; ++i) header_bytes_ |= std::uint64_t{length[i]} << (8 * i);
  if (header_bytes_ < 2 || header_bytes_ > kMaxHeaderBytes || header_bytes_ > file_bytes - 8) {
    fail(fmt::format("truncated or not a safetensors file: the header length field says {} bytes "
                     "but the file has {} bytes after it",
                     header_bytes_, file_bytes - 8));
  }
  data_bytes_ = file_bytes - 8 - header_bytes_;
  std::string text(header_bytes_, '\0');
  if (::pread(fd_, text.data(), text.size(), 8) != static_cast<ssize_t>(text.size())) {
    fail("cannot read the header");
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // The parser's message quotes the bytes it last read: bounded and escaped.
    fail(fmt::format("corrupt header: not valid JSON ({})", escaped_excerpt(e.what(), 160)));
  }
  if (!header.is_object()) fail("corrupt header: the JSON is not an object");

  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail("corrupt header: __metadata__ is not an object");
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) {
          fail(fmt::format("corrupt header: metadata '{}' is not a string", escaped_excerpt(key)));
        }
        metadata_[key] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = fmt::format("corrupt header: tensor '{}'", escaped_excerpt(name));
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets")) {
      fail(where + " needs dtype, shape and data_offsets");
    }
    TensorEntry t;
    t.name = name;
    if (!value["dtype"].is_string()) fail(where + ": dtype is not a string");
    t.dtype = value["dtype"].get<std::string>();
    if (dtype_size(t.dtype) == 0) {
      fail(fmt::format("{}: unknown dtype '{}'", where, escaped_excerpt(t.dtype)));
    }
    if (!value["shape"].is_array()) fail(where + ": shape is not an array");
    for (const auto& d : value["shape"]) {
      if (!d.is_number_unsigned()) fail(where + ": shape has a negative or non-integer entry");
      t.shape.push_back(static_cast<std::int64_t>(
          std::min<std::uint64_t>(d.get<std::uint64_t>(), std::uint64_t{1} << 62)));
    }
    const auto& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      fail(where + ": data_offsets is not [begin, end]");
    }
    t.begin = offsets[0].get<std::uint64_t>();
    t.end = offsets[1].get<std::uint64_t>();
    const std::int64_t numel = t.numel();
    if (numel < 0) fail(where + ": shape too large");
    if (t.end < t.begin ||
        t.end - t.begin != static_cast<std::uint64_t>(numel * dtype_size(t.dtype))) {
      fail(fmt::format("{}: data_offsets [{}, {}) do not hold {} {} of {}", where, t.begin, t.end,
                       format_shape(t.shape), t.dtype, numel * dtype_size(t.dtype)));
    }
    if (t.end > data_bytes_) {
      fail(fmt::format("truncated: tensor '{}' ends at byte {} of the data section, which has "
                       "only {} bytes",
                       escaped_excerpt(name), t.end, data_bytes_));
    }
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // As the reference reader: tensors tile the data section exactly (no overlaps, gaps or tail).
  std::uint64_t expected = 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const TensorEntry& t = tensors_[i];
    if (t.begin < expected) {
      fail(fmt::format("corrupt header: tensors '{}' and '{}' overlap in the data section",
                       escaped_excerpt(tensors_[i - 1].name), escaped_excerpt(t.name)));
    }
    if (t.begin > expected) {
      fail(fmt::format("corrupt header: {} unused bytes before tensor '{}'", t.begin - expected,
                       escaped_excerpt(t.name)));
    }
    expected = t.end;
    index_[t.name] = i;
  }
  if (expected != data_bytes_) {
    const std::string last =
        tensors_.empty() ? "" : fmt::format(" ('{}')", escaped_excerpt(tensors_.back().name));
    fail(fmt::format("{} bytes after the last tensor{}: the file was appended to or its header "
                     "damaged",
                     data_bytes_ - expected, last));
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

const TensorEntry* SafetensorsReader::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsReader::read_data(std::uint64_t begin, void* out, std::size_t bytes) const {
  auto* p = static_cast<char*>(out);
  std::uint64_t position = 8 + header_bytes_ + begin;
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, std::min<std::size_t>(bytes, 1u << 30),
                              static_cast<off_t>(position));
    if (n <= 0) {
      const std::string why = n == 0 ? "end of file" : std::strerror(errno);
      fail(fmt::format("cannot read bytes at data offset {}: {} (was the file changed or "
                       "truncated while reading?)",
                       position - 8 - header_bytes_, why));
    }
    p += n;
    position += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
}

void SafetensorsReader::verify_checksums(const ChunkVisitor& visit) const {
  auto recorded = [&](const std::string& key, const std::string& what) -> std::int64_t {
    const auto it = metadata_.find(key);
    if (it == metadata_.end()) return -1;
    const std::optional<std::uint32_t> crc = parse_crc_hex(it->second);
    if (!crc) {
      fail(fmt::format("corrupt header: the CRC32 of {} is '{}', not 8 lower-case hex digits",
                       what, escaped_excerpt(it->second)));
    }
    return static_cast<std::int64_t>(*crc);
  };
  std::vector<char> buffer(kChunkBytes);
  auto data_crc = std::uint32_t{0};
  for (const TensorEntry& t : tensors_) {
    auto crc = std::uint32_t{0};
    for (std::uint64_t at = t.begin; at < t.end;) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunkBytes, t.end - at));
      read_data(at, buffer.data(), n);
      crc = crc32_update(crc, buffer.data(), n);
      if (visit) visit(t, at - t.begin, buffer.data(), n);
      at += n;
    }
    // As in the writer: every byte goes through the CRC once.
    data_crc = static_cast<std::uint32_t>(
        crc32_combine(data_crc, crc, static_cast<z_off_t>(t.end - t.begin)));
    const std::int64_t expected = recorded(tensor_crc_key(t.name),
                                          fmt::format("tensor '{}'", escaped_excerpt(t.name)));
    if (expected >= 0 && expected != crc) {
      fail(fmt::format("corrupt data: tensor '{}' (bytes [{}, {}) of the data section) has CRC32 "
                       "{}, the header records {}; the file was damaged after it was written — "
                       "resume from an earlier checkpoint",
                       escaped_excerpt(t.name), t.begin, t.end, crc_hex(crc),
                       crc_hex(static_cast<std::uint32_t>(expected))));
    }
  }
  const std::int64_t expected = recorded(kDataCrcKey, "the data section");
  if (expected >= 0 && expected != data_crc) {
    fail(fmt::format("corrupt data: the data section has CRC32 {}, the header records {}",
                     crc_hex(data_crc), crc_hex(static_cast<std::uint32_t>(expected))));
  }
}

void SafetensorsReader::read_f32(const std::string& name, const std::vector<std::int64_t>& shape,
                                 float* out) const {
  const TensorEntry* t = find(name);
  if (!t) {
    fail(fmt::format("missing tensor '{}' ({} tensors in the file; `zerolap inspect {}` lists "
                     "them): it was written for another model or optimizer",
                     name, tensors_.size(), path_));
  }
  if (t->dtype != "F32") {
    fail(fmt::format("tensor '{}' has dtype {}; zerolap reads F32 (float32) tensors only", name,
                     t->dtype));
  }
  if (t->shape != shape) {
    fail(fmt::format("tensor '{}' has shape {}, the model expects {}: the checkpoint was written "
                     "for another model (compare model.kind and model.widths)",
                     name, format_shape(t->shape), format_shape(shape)));
  }
  read_data(t->begin, out, static_cast<std::size_t>(t->end - t->begin));
}

}  // namespace zl
