// `zerolap inspect FILE`: lists the tensors (name, dtype, shape, bytes, CRC32) and the metadata of a
// safetensors checkpoint after validating its structure and checksums. Any safetensors file is
// listed; a corrupt or truncated one is a UserError (exit 2) naming the file and the tensor. A
// checkpoint directory, or its `latest` pointer, stands for the checkpoint `latest` names.
#include <algorithm>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "base/regular_file.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/checkpoint/files/shard_manifest.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/inspect_sharded.h"

namespace zl {
namespace {

std::string checkpoint_file(const std::string& path) {
  if (const auto manifest = sharded_manifest_of(path)) return *manifest;  // a sharded checkpoint
  if (const auto latest = checkpoint_named_by_latest(path)) return *latest;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw UserError(fmt::format("{}: no checkpoint to inspect (no '{}' pointer in it)", path,
                                kLatestPointerName));
  }
  return path;
}

}  // namespace

int run_inspect_command(const std::string& given_path, const World& world) {
  agree_on_user_errors(world, [&] {
    if (!world.is_root()) return;  // one listing per job, however many ranks
    const std::string path = checkpoint_file(given_path);
    if (path != given_path) fmt::print("{}: latest checkpoint {}\n", given_path, path);
    if (sharded_manifest_of(path)) {
      inspect_sharded_checkpoint(path);
      return;
    }
    const SafetensorsReader file(path);
    file.verify_checksums();
    fmt::print("{}: {} tensors, {} bytes of data, {}-byte header, checksums {}\n", path,
               file.tensors().size(), file.data_bytes(), file.header_bytes(),
               file.has_checksums() ? "ok (CRC32)" : "absent (not written by zerolap)");
    // A zerolap checkpoint's precision up front: its parameter tensors are fp32 either way (the
    // masters of a bf16 run), so the dtype column alone cannot say what trained it.
    const auto& meta = file.metadata();
    if (meta.count("precision") != 0 && meta.count("step") != 0) {
      const auto value = [&](const char* key) {
        const auto it = meta.find(key);
        return it == meta.end() ? std::string("?") : it->second;
      };
      fmt::print("step {}, precision {} (reduce_dtype {}, master_weights {}); parameters stored as "
                 "fp32{}\n",
                 value("step"), value("precision"), value("reduce_dtype"), value("master_weights"),
                 value("precision") == "bf16" ? " master weights" : "");
    }
    // Names and metadata are the file's bytes: printed escaped and bounded, so control bytes
    // never reach the terminal and a huge name cannot flood it.
    const auto shown = [](std::string_view text, std::size_t max) {
      return escaped_excerpt(text, max, Quotes::AsIs);
    };
    std::size_t width = 4;
    for (const TensorEntry& t : file.tensors()) width = std::max(width, shown(t.name, 200).size());
    fmt::print("\n{:<{}}  {:<5}  {:<14}  {:>12}  {}\n", "name", width, "dtype", "shape", "bytes",
               "crc32");
    for (const TensorEntry& t : file.tensors()) {
      const auto crc = file.metadata().find(tensor_crc_key(t.name));
      fmt::print("{:<{}}  {:<5}  {:<14}  {:>12}  {}\n", shown(t.name, 200), width,
                 shown(t.dtype, 16), format_shape(t.shape), t.end - t.begin,
                 crc == file.metadata().end() ? "-" : shown(crc->second, 16));
    }
    fmt::print("\nmetadata:\n");
    const std::string multi_line_key = "config";
    for (const auto& [key, value] : file.metadata()) {
      if (key.rfind(tensor_crc_key(""), 0) == 0 || key == multi_line_key) continue;
      fmt::print("  {} = {}\n", shown(key, 200), shown(value, 1000));
    }
    if (const auto config = file.metadata().find(multi_line_key); config != file.metadata().end()) {
      fmt::print("\nconfig of the run that wrote it:\n");
      std::istringstream lines(config->second);
      for (std::string line; std::getline(lines, line);) fmt::print("  {}\n", shown(line, 1000));
    }
    std::fflush(stdout);
  });
  return 0;
}

}  // namespace zl
