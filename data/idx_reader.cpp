// IDX reader (the MNIST file format) and the Fashion-MNIST loader. Every file goes through zlib's
// gzopen, which tells gzip from plain data by the magic bytes (1f 8b), not by the name, so a
// `.gz` suffix is optional either way. Any defect in a file is a UserError that names the path.
// Trailing bytes after the data the header declares are an error: real IDX files have none, and
// extra data means the header (and so every dimension we would trust) is wrong.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/errors.h"
#include "base/regular_file.h"
#include "data/dataset.h"

namespace zl {
namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dims (n, rows, cols)
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dim (n)
constexpr std::int64_t kFashionMnistClasses = 10;

// Bounds that only a corrupt header exceeds; they keep n * rows * cols far from overflow.
constexpr std::uint32_t kMaxCount = 0x7FFFFFFF;
constexpr std::uint32_t kMaxSide = 1u << 14;
constexpr std::uint64_t kMaxImageBytes = 1ull << 24;

// A header can lie about the count (and a gzip file's size says nothing about it), so memory is
// reserved up to this many elements and beyond it grows only as bytes actually arrive.
constexpr std::uint64_t kMaxReserve = 1ull << 28;
constexpr std::size_t kChunkBytes = 1u << 20;

// An open IDX file, plain or gzip. Reads return short only at the end of the data; zlib and
// system errors throw.
class IdxFile {
 public:
  IdxFile(const std::string& path, const char* what) : path_(path), what_(what) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      throw UserError(fmt::format("cannot access {} file '{}': {}", what_, path_, ec.message()));
    }
    if (!std::filesystem::exists(status)) {
      throw UserError(fmt::format(
          "{} file '{}' does not exist; check the path (data.path / data.train_images ...)", what_,
          path_));
    }
    if (std::filesystem::is_directory(status)) {
      throw UserError(fmt::format("{} file '{}' is a directory, not an IDX file", what_, path_));
    }
    // Opened without blocking and checked to be a regular file (a FIFO named by mistake would
    // otherwise block forever); zlib then reads from the descriptor.
    ReadableFile opened = open_regular_file(path, std::string(what_) + " file");
    errno = 0;
    file_ = gzdopen(opened.fd(), "rb");
    if (file_ != nullptr) opened.release();  // gzclose closes it
    if (file_ == nullptr) {
      throw UserError(fmt::format("cannot open {} file '{}': {}", what_, path_,
                                  errno != 0 ? std::strerror(errno) : "out of memory"));
    }
    gzbuffer(file_, 1u << 18);  // fewer syscalls on the 47 MB training images
  }
  ~IdxFile() { gzclose(file_); }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  const std::string& path() const { return path_; }
  const char* what() const { return what_; }
  // gzip or plain, for messages ("the gzip stream ends" vs "the file ends").
  const char* kind() const { return gzdirect(file_) ? "file" : "gzip stream"; }

  std::size_t read(unsigned char* dst, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      const unsigned want = static_cast<unsigned>(std::min<std::size_t>(n - got, kChunkBytes));
      const int r = gzread(file_, dst + got, want);
      if (r > 0) {
        got += static_cast<std::size_t>(r);
        continue;
      }
      const int saved_errno = errno;
      int errnum = Z_OK;
      const char* message = gzerror(file_, &errnum);
      // Z_BUF_ERROR is zlib's "unexpected end of file" inside a gzip stream: a truncated file,
      // which the caller reports with the byte counts.
      if (errnum == Z_OK || errnum == Z_BUF_ERROR) break;
      if (errnum == Z_ERRNO) {
        throw UserError(
            fmt::format("cannot read {} file '{}': {}", what_, path_, std::strerror(saved_errno)));
      }
      throw UserError(fmt::format("{} file '{}' holds corrupt gzip data ({}); re-download it",
                                  what_, path_, message));
    }
    return got;
  }

  std::uint32_t read_be32(const char* field) {
    std::array<unsigned char, 4> b{};
    if (read(b.data(), b.size()) != b.size()) {
      throw UserError(fmt::format(
          "{} file '{}' is truncated: the {} ends inside the header (at the {}); re-download it",
          what_, path_, kind(), field));
    }
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
           std::uint32_t{b[3]};
  }

  void check_magic(std::uint32_t magic, std::uint32_t expected, const char* layout) {
    if (magic == expected) return;
    std::string hint;
    if (magic == kLabelsMagic || magic == kImagesMagic) {
      hint = fmt::format(" — it is an IDX {} file; are the images and labels paths swapped?",
                         magic == kLabelsMagic ? "labels" : "images");
    } else if ((magic >> 16) == 0 && ((magic >> 8) & 0xFF) == 0x08) {
      hint = fmt::format(" — an IDX file of {} dimensions", magic & 0xFF);
    } else {
      hint = " — not an IDX file (an HTML error page or a partial download?); re-download it";
    }
    throw UserError(fmt::format("{} file '{}' has magic number 0x{:08x}, expected 0x{:08x} ({}){}",
                                what_, path_, magic, expected, layout, hint));
  }

  // Real IDX files end exactly where the header says; see the file comment.
  void expect_end(const std::string& declared) {
    unsigned char extra = 0;
    if (read(&extra, 1) != 0) {
      throw UserError(fmt::format(
          "{} file '{}' holds more data than its header declares ({}); the file is corrupt or "
          "its header is wrong",
          what_, path_, declared));
    }
  }

 private:
  std::string path_;
  const char* what_;
  gzFile file_ = nullptr;
};

struct IdxImages {
  std::int64_t count = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<float> pixels;  // (count, rows * cols), scaled to [0, 1]
};

IdxImages read_idx_images(const std::string& path) {
  IdxFile file(path, "IDX images");
  file.check_magic(file.read_be32("magic number"), kImagesMagic, "unsigned bytes, 3 dimensions");
  const std::uint32_t count = file.read_be32("image count");
  const std::uint32_t rows = file.read_be32("row count");
  const std::uint32_t cols = file.read_be32("column count");
  if (count == 0 || count > kMaxCount || rows == 0 || rows > kMaxSide || cols == 0 ||
      cols > kMaxSide || std::uint64_t{rows} * cols > kMaxImageBytes) {
    throw UserError(fmt::format(
        "IDX images file '{}' declares {} images of {} x {} pixels, which is not a usable image "
        "set (need 1..{} images, sides 1..{}, at most {} pixels each); the header is corrupt",
        path, count, rows, cols, kMaxCount, kMaxSide, kMaxImageBytes));
  }

  IdxImages images;
  images.count = count;
  images.rows = rows;
  images.cols = cols;
  const std::uint64_t total = std::uint64_t{count} * rows * cols;
  images.pixels.reserve(std::min(total, kMaxReserve));

  std::array<float, 256> scale{};  // exact byte / 255 for every byte value, once
  for (int v = 0; v < 256; ++v) scale[v] = static_cast<float>(v) / 255.0f;

  std::vector<unsigned char> chunk(kChunkBytes);
  std::uint64_t done = 0;
  while (done < total) {
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(total - done, chunk.size()));
    const std::size_t got = file.read(chunk.data(), want);
    for (std::size_t i = 0; i < got; ++i) images.pixels.push_back(scale[chunk[i]]);
    done += got;
    if (got < want) {
      throw UserError(fmt::format(
          "IDX images file '{}' is truncated: its header promises {} images of {} x {} ({} bytes "
          "of pixels) but the {} ends after {} of them; re-download it",
          path, count, rows, cols, total, file.kind(), done));
    }
  }
  file.expect_end(fmt::format("{} images of {} x {}", count, rows, cols));
  return images;
}

std::vector<std::int32_t> read_idx_labels(const std::string& path) {
  IdxFile file(path, "IDX labels");
  file.check_magic(file.read_be32("magic number"), kLabelsMagic, "unsigned bytes, 1 dimension");
  const std::uint32_t count = file.read_be32("label count");
  if (count == 0 || count > kMaxCount) {
    throw UserError(
        fmt::format("IDX labels file '{}' declares {} labels (need 1..{}); the header is corrupt",
                    path, count, kMaxCount));
  }
  std::vector<std::int32_t> labels;
  labels.reserve(std::min<std::uint64_t>(count, kMaxReserve));
  std::vector<unsigned char> chunk(kChunkBytes);
  std::uint64_t done = 0;
  while (done < count) {
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(count - done, chunk.size()));
    const std::size_t got = file.read(chunk.data(), want);
    labels.insert(labels.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(got));
    done += got;
    if (got < want) {
      throw UserError(fmt::format(
          "IDX labels file '{}' is truncated: its header promises {} labels but the {} ends after "
          "{}; re-download it",
          path, count, file.kind(), done));
    }
  }
  file.expect_end(fmt::format("{} labels", count));
  return labels;
}

// Fails when a label is >= num_classes, naming the first offending sample.
void check_labels_below(const Dataset& data, std::int64_t num_classes, const std::string& path,
                        const char* dataset) {
  for (std::size_t i = 0; i < data.labels.size(); ++i) {
    if (data.labels[i] >= num_classes) {
      throw UserError(fmt::format(
          "IDX labels file '{}': label {} of sample {} is outside {}'s {} classes (0..{}); the "
          "file is not {} labels",
          path, data.labels[i], i, dataset, num_classes, num_classes - 1, dataset));
    }
  }
}

// `<dir>/<base>.gz` when it exists, else `<dir>/<base>`; UserError with the install hint if
// neither.
std::string find_fashion_file(const std::string& dir, const std::string& base) {
  const std::filesystem::path gz = std::filesystem::path(dir) / (base + ".gz");
  const std::filesystem::path plain = std::filesystem::path(dir) / base;
  std::error_code ec;
  if (std::filesystem::exists(gz, ec)) return gz.string();
  if (std::filesystem::exists(plain, ec)) return plain.string();
  throw UserError(fmt::format(
      "Fashion-MNIST file '{}' (or '{}') is missing. Install the dataset with "
      "`apt-get install dataset-fashion-mnist` (scripts/setup.sh does this), or set data.path to "
      "a directory holding {{train,t10k}}-{{images-idx3,labels-idx1}}-ubyte[.gz]",
      gz.string(), plain.string()));
}

}  // namespace

Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path,
                      const std::string& name) {
  IdxImages images = read_idx_images(images_path);
  std::vector<std::int32_t> labels = read_idx_labels(labels_path);
  if (static_cast<std::int64_t>(labels.size()) != images.count) {
    throw UserError(fmt::format(
        "IDX image/label count mismatch: '{}' holds {} images but '{}' holds {} labels; the two "
        "files must come from the same set",
        images_path, images.count, labels_path, labels.size()));
  }
  Dataset data;
  data.name = name;
  data.task = TaskKind::Classification;
  data.num_samples = images.count;
  data.feature_dim = images.rows * images.cols;
  data.num_classes = *std::max_element(labels.begin(), labels.end()) + 1;
  data.features = std::move(images.pixels);
  data.labels = std::move(labels);
  return data;
}

DatasetSplits load_idx_splits(const std::string& train_images, const std::string& train_labels,
                              const std::string& test_images, const std::string& test_labels,
                              const std::string& name) {
  DatasetSplits splits;
  splits.train = load_idx_pair(train_images, train_labels, name + "/train");
  splits.test = load_idx_pair(test_images, test_labels, name + "/test");
  if (splits.train.feature_dim != splits.test.feature_dim) {
    throw UserError(fmt::format(
        "IDX train images '{}' have {} pixels each but test images '{}' have {}; both sets must "
        "have the same image size",
        train_images, splits.train.feature_dim, test_images, splits.test.feature_dim));
  }
  // A test set may lack the top class; both must agree on the model's output width.
  const std::int64_t classes = std::max(splits.train.num_classes, splits.test.num_classes);
  splits.train.num_classes = classes;
  splits.test.num_classes = classes;
  return splits;
}

DatasetSplits load_fashion_mnist(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    throw UserError(fmt::format(
        "Fashion-MNIST data.path '{}' is a file, not a directory: set data.path to the directory "
        "holding {{train,t10k}}-{{images-idx3,labels-idx1}}-ubyte[.gz] (the installed set is in "
        "{}), or read one IDX set with data.kind = \"idx\" and data.train_images ...",
        dir, kDefaultFashionMnistDir));
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    throw UserError(fmt::format(
        "Fashion-MNIST directory '{}' does not exist. Install the dataset with "
        "`apt-get install dataset-fashion-mnist` (scripts/setup.sh does this; it installs to {}), "
        "or set data.path to a directory holding "
        "{{train,t10k}}-{{images-idx3,labels-idx1}}-ubyte[.gz]",
        dir, kDefaultFashionMnistDir));
  }
  const std::string train_images = find_fashion_file(dir, "train-images-idx3-ubyte");
  const std::string train_labels = find_fashion_file(dir, "train-labels-idx1-ubyte");
  const std::string test_images = find_fashion_file(dir, "t10k-images-idx3-ubyte");
  const std::string test_labels = find_fashion_file(dir, "t10k-labels-idx1-ubyte");
  DatasetSplits splits =
      load_idx_splits(train_images, train_labels, test_images, test_labels, "fashion_mnist");
  check_labels_below(splits.train, kFashionMnistClasses, train_labels, "Fashion-MNIST");
  check_labels_below(splits.test, kFashionMnistClasses, test_labels, "Fashion-MNIST");
  // Always 10, even for a (sub)set that lacks a class, so the model's width never depends on it.
  splits.train.num_classes = kFashionMnistClasses;
  splits.test.num_classes = kFashionMnistClasses;
  return splits;
}

}  // namespace zl
