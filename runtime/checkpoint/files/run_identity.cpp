// Run ids, run.json and a checkpoint's run id (see run_identity.h).
#include "runtime/checkpoint/files/run_identity.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/checkpoint/files/shard_manifest.h"

namespace zl {
namespace fs = std::filesystem;
namespace {

// A run record holds one config; anything larger is not one.
constexpr std::int64_t kMaxRecordBytes = std::int64_t{16} << 20;

[[noreturn]] void unreadable(const fs::path& path, const std::string& why) {
  throw UserError(fmt::format(
      "'{}' is unreadable ({}): it records which run owns the directory, so zerolap cannot tell "
      "whether this run may write there. Restore it, remove it if the directory's files are yours "
      "to replace, or choose another directory",
      path.string(), why));
}

// What tells a checkpoint from another of its run: its __metadata__ (step, config, world size,
// and for a file the CRC32 of each tensor and of the data section), and for a sharded one the CRC32
// of each shard file. Throws UserError when `path` cannot be read as a checkpoint.
std::string content_identity(const std::string& path) {
  std::string id;
  if (const auto manifest = sharded_manifest_of(path)) {
    const Manifest m = read_manifest(*manifest);
    id = "sharded\n";
    for (const auto& [key, value] : m.metadata) id += key + "=" + value + "\n";
    for (const ShardEntry& s : m.shards) id += fmt::format("shard {} {:08x}\n", s.bytes, s.crc32);
    return id;
  }
  const SafetensorsReader file(path);
  id = "file\n";
  for (const auto& [key, value] : file.metadata()) id += key + "=" + value + "\n";
  return id;
}

}  // namespace

std::string new_run_id() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::random_device device;
  // random_device may be deterministic on some platforms: mix in the clock and the pid as well.
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  std::seed_seq seq{device(), device(), static_cast<unsigned>(ticks),
                    static_cast<unsigned>(::getpid())};
  std::mt19937 rng(seq);
  return fmt::format("{:04d}{:02d}{:02d}-{:02d}{:02d}{:02d}-{:08x}", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                     static_cast<unsigned>(rng()));
}

std::optional<RunRecord> read_run_record(const std::string& dir) {
  const fs::path path = fs::path(dir) / kRunRecordName;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  std::string text;
  try {
    text = read_small_file(path.string(), "run record", kMaxRecordBytes);
  } catch (const UserError& e) {
    unreadable(path, e.what());
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) unreadable(path, "not JSON");
  if (!j.is_object()) unreadable(path, "not a JSON object");
  const auto field = [&](const char* key) { return j.value(key, nlohmann::json()); };
  if (field("format") != kRunRecordFormat) {
    unreadable(path, fmt::format("no \"format\": \"{}\"", kRunRecordFormat));
  }
  for (const char* key : {"run_id", "command", "config"}) {
    if (!field(key).is_string()) unreadable(path, fmt::format("\"{}\" is not a string", key));
  }
  if (!field("world_size").is_number_integer()) {
    unreadable(path, "\"world_size\" is not an integer");
  }
  RunRecord record{field("run_id").get<std::string>(), field("command").get<std::string>(),
                   field("world_size").get<std::int64_t>(), field("config").get<std::string>()};
  if (record.run_id.empty()) unreadable(path, "\"run_id\" is empty");
  return record;
}

void write_run_record(const std::string& dir, const RunRecord& record) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw UserError(fmt::format("cannot create directory '{}': {} (set it to a writable one)", dir,
                                ec.message()));
  }
  const nlohmann::json j = {{"format", kRunRecordFormat},
                            {"run_id", record.run_id},
                            {"command", record.command},
                            {"world_size", record.world_size},
                            {"config", record.config}};
  replace_file_durably(dir, kRunRecordName, j.dump(2) + "\n", "run record");
}

std::optional<std::string> checkpoint_metadata_value(const std::string& path, const char* key) {
  try {
    if (const auto manifest = sharded_manifest_of(path)) {  // a sharded checkpoint: its manifest's
      return metadata_value(read_manifest(*manifest).metadata, key);
    }
    return metadata_value(SafetensorsReader(path).metadata(), key);
  } catch (const UserError&) {
    return std::nullopt;
  }
}

bool same_checkpoint(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  try {
    return content_identity(a) == content_identity(b);
  } catch (const UserError&) {
    return false;
  }
}

}  // namespace zl
