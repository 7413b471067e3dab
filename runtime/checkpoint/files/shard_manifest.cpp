// The manifest of a sharded checkpoint (see shard_manifest.h): JSON in and out, its checks, and
// the shard-file checks against it.
#include "runtime/checkpoint/files/shard_manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/checked_size.h"
#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/files/checkpoint_values.h"
#include "runtime/checkpoint/files/crc32.h"

namespace zl {
namespace fs = std::filesystem;
using nlohmann::json;

// A piece and a parameter as JSON objects whose keys are their fields' names: renaming a field
// changes the file format.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShardPiece, name, begin, numel)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ManifestParameter, name, shape)

namespace {

constexpr std::int64_t kMaxManifestBytes = std::int64_t{256} << 20;
constexpr std::size_t kCrcChunk = std::size_t{4} << 20;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw UserError(fmt::format("sharded checkpoint manifest '{}': {}", path, what));
}

json body_json(const Manifest& m) {
  json shards = json::array();
  for (const ShardEntry& s : m.shards) {
    shards.push_back({{"file", s.file},
                      {"rank", s.rank},
                      {"bytes", s.bytes},
                      {"crc32", crc_hex(s.crc32)},
                      {"pieces", s.pieces}});
  }
  return {{"format", kShardedFormat},
          {"format_version", kShardedFormatVersion},
          {"step", m.step},
          {"generation", m.generation},
          {"world_size", m.world_size},
          {"parameters", m.parameters},
          {"optimizer_state", m.state_names},
          {"metadata", m.metadata},
          {"shards", std::move(shards)}};
}

std::uint32_t text_crc(const std::string& text) {
  return crc32_update(0, text.data(), text.size());
}

std::uint32_t parse_crc(const std::string& hex, const std::string& path, const std::string& what) {
  const std::optional<std::uint32_t> value = parse_crc_hex(hex);
  if (!value) {
    fail(path, fmt::format("{} '{}' is not 8 lower-case hex digits", what, escaped_excerpt(hex)));
  }
  return *value;
}

// Every number of a manifest is a count, a size or an index: a JSON integer that fits in 64 signed
// bits. get<std::int64_t> would truncate 112.5 to 112 and wrap 2^64 - 8 to -8, so a hand-edited
// value passed as another one. `where` names the value ("shards[1].pieces[0].begin").
void check_integers(const json& j, const std::string& where, const std::string& path) {
  const bool too_big = j.is_number_unsigned() &&
                       j.get<std::uint64_t>() > std::uint64_t{INT64_MAX};
  if (j.is_number_float() || too_big) {
    fail(path, fmt::format("{} = {} is not an integer (of at most 2^63 - 1)",
                           escaped_excerpt(where, 200, Quotes::AsIs), j.dump()));
  }
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      check_integers(value, where.empty() ? key : where + "." + key, path);
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      check_integers(j[i], fmt::format("{}[{}]", where, i), path);
    }
  }
}

// An int field (world_size, rank): get<int> would keep the low 32 bits of 2^32 + 2.
int int_field(const json& j, const char* key, const std::string& path) {
  const auto value = j.at(key).get<std::int64_t>();
  if (value < 0 || value > INT_MAX) fail(path, fmt::format("{} = {} is out of range", key, value));
  return static_cast<int>(value);
}

// CRC32 (zlib) of a whole file, read in bounded chunks; UserError naming the file when unreadable.
std::uint32_t file_crc32(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw UserError(
        fmt::format("checkpoint shard '{}': cannot open: {}", path, std::strerror(errno)));
  }
  std::vector<unsigned char> buf(kCrcChunk);
  std::uint32_t crc = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string reason = std::strerror(errno);
      ::close(fd);
      throw UserError(fmt::format("checkpoint shard '{}': cannot read: {}", path, reason));
    }
    if (n == 0) break;
    crc = crc32_update(crc, buf.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return crc;
}

}  // namespace

std::int64_t ManifestParameter::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

std::string shard_file_name(int rank, int world, std::int64_t generation) {
  return fmt::format("shard_{:05d}_of_{:05d}.g{}.safetensors", rank, world, generation);
}

std::optional<std::string> sharded_manifest_of(const std::string& path) {
  std::error_code ec;
  if (fs::path(path).filename() == kManifestName) return path;
  const fs::path inside = fs::path(path) / kManifestName;
  if (fs::is_directory(path, ec) && fs::exists(inside, ec)) return inside.string();
  return std::nullopt;
}

std::string complete_shard_path(const std::string& manifest_path, const ShardEntry& s) {
  const fs::path parent = fs::path(manifest_path).parent_path();
  const std::string file = ((parent.empty() ? fs::path(".") : parent) / s.file).string();
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    throw UserError(
        fmt::format("checkpoint shard '{}' of rank {} is missing (named by '{}'): the "
                    "checkpoint is incomplete; resume from an earlier one",
                    file, s.rank, manifest_path));
  }
  if (!S_ISREG(st.st_mode)) {
    throw UserError(fmt::format("checkpoint shard '{}' of rank {} is {}, not a regular file (named "
                                "by '{}'): resume from another checkpoint",
                                file, s.rank, file_type_name(st.st_mode), manifest_path));
  }
  const auto bytes = static_cast<std::uint64_t>(st.st_size);
  if (bytes != s.bytes) {
    throw UserError(
        fmt::format("checkpoint shard '{}' has {} bytes, its manifest '{}' says {}: "
                    "the file is truncated or belongs to another checkpoint",
                    file, bytes, manifest_path, s.bytes));
  }
  return file;
}

std::string manifest_to_json(const Manifest& m) {
  const std::string body = body_json(m).dump();
  // The checksum covers the body as dumped: nlohmann's objects are sorted maps, so parsing and
  // dumping again gives the same text (parse_manifest relies on it).
  json whole = {{"crc32", crc_hex(text_crc(body))}, {"manifest", json::parse(body)}};
  return whole.dump(1) + "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& path) {
  json whole;
  try {
    whole = json::parse(text);
  } catch (const json::exception& e) {
    fail(path, fmt::format("not valid JSON ({}): the file was damaged", e.what()));
  }
  Manifest m;
  try {
    const json& body = whole.at("manifest");
    if (parse_crc(whole.at("crc32").get<std::string>(), path, "crc32") != text_crc(body.dump())) {
      fail(path, "its CRC32 does not match its content: the file was damaged");
    }
    if (body.at("format").get<std::string>() != kShardedFormat) {
      fail(path, fmt::format("format is not \"{}\"", kShardedFormat));
    }
    if (body.at("format_version").get<std::string>() != kShardedFormatVersion) {
      fail(path, fmt::format("format_version '{}', this zerolap reads version {}",
                             escaped_excerpt(body.at("format_version").get<std::string>()),
                             kShardedFormatVersion));
    }
    check_integers(body, "", path);
    m.step = body.at("step").get<std::int64_t>();
    m.generation = body.at("generation").get<std::int64_t>();
    m.world_size = int_field(body, "world_size", path);
    for (const json& p : body.at("parameters")) m.parameters.push_back(p.get<ManifestParameter>());
    m.state_names = body.at("optimizer_state").get<std::vector<std::string>>();
    m.metadata = body.at("metadata").get<std::map<std::string, std::string>>();
    for (const json& s : body.at("shards")) {
      ShardEntry e;
      e.file = s.at("file").get<std::string>();
      e.rank = int_field(s, "rank", path);
      e.bytes = s.at("bytes").get<std::uint64_t>();
      e.crc32 = parse_crc(s.at("crc32").get<std::string>(), path, "a shard's crc32");
      for (const json& p : s.at("pieces")) e.pieces.push_back(p.get<ShardPiece>());
      m.shards.push_back(std::move(e));
    }
  } catch (const json::exception& e) {
    fail(path, fmt::format("a field is missing or has the wrong type ({})", e.what()));
  }
  // Shards: one per rank, in rank order, plain file names inside the checkpoint's directory.
  if (m.world_size < 1 || static_cast<int>(m.shards.size()) != m.world_size) {
    fail(path, fmt::format("names {} shards for world_size {}", m.shards.size(), m.world_size));
  }
  std::map<std::string, const ManifestParameter*> params;
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;  // per dimension and per parameter
  for (const ManifestParameter& p : m.parameters) {
    CheckedSize elements = 1;
    for (const std::int64_t d : p.shape) {
      if (d < 0 || d > kMaxElements) fail(path, fmt::format("'{}' has a bad shape", p.name));
      elements *= d;
    }
    if (!elements.fits(kMaxElements)) {  // numel() is computed unchecked from here on
      fail(path, fmt::format("'{}' has a bad shape (more than 2^40 elements)", p.name));
    }
    if (!params.emplace(p.name, &p).second) fail(path, fmt::format("'{}' listed twice", p.name));
  }
  std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> covered;
  std::map<std::string, std::size_t> shard_of_file;
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    const ShardEntry& s = m.shards[i];
    if (s.rank != static_cast<int>(i) || s.file.empty() || s.file.find('/') != std::string::npos ||
        s.file == "." || s.file == "..") {
      fail(path, fmt::format("shard {} ('{}', rank {}) is not a file of this directory in rank "
                             "order",
                             i, escaped_excerpt(s.file), s.rank));
    }
    if (const auto [it, added] = shard_of_file.emplace(s.file, i); !added) {
      fail(path, fmt::format("shards {} and {} both name '{}': each rank's shard is its own file",
                             it->second, i, escaped_excerpt(s.file)));
    }
    for (const ShardPiece& p : s.pieces) {
      const auto it = params.find(p.name);
      if (it == params.end()) {
        fail(path, fmt::format("shard '{}' holds '{}', which is not among its parameters", s.file,
                               escaped_excerpt(p.name)));
      }
      if (p.begin < 0 || p.numel <= 0 || p.begin > it->second->numel() - p.numel) {
        fail(path, fmt::format("shard '{}': piece [{}, +{}) of '{}' is outside its {} elements",
                               s.file, p.begin, p.numel, p.name, it->second->numel()));
      }
      covered[p.name].emplace_back(p.begin, p.numel);
    }
  }
  for (const ManifestParameter& p : m.parameters) {
    auto& pieces = covered[p.name];
    std::sort(pieces.begin(), pieces.end());
    std::int64_t at = 0;
    for (const auto& [begin, numel] : pieces) {
      if (begin != at) break;
      at += numel;
    }
    if (at != p.numel()) {
      fail(path, fmt::format("the shards do not hold every element of '{}' exactly once", p.name));
    }
  }
  return m;
}

std::string read_manifest_text(const std::string& path) {
  return read_small_file(path, "sharded checkpoint manifest", kMaxManifestBytes);
}

Manifest read_manifest(const std::string& path) {
  return parse_manifest(read_manifest_text(path), path);
}

void write_manifest(const std::string& dir, const Manifest& m) {
  replace_file_durably(dir, kManifestName, manifest_to_json(m), "checkpoint manifest");
}

CheckpointFacts check_manifest_facts(const Manifest& m, const std::string& path) {
  const auto failed = [&](const std::string& what) {
    return UserError(fmt::format("sharded checkpoint '{}': {}", path, what));
  };
  if (metadata_value(m.metadata, "format") != kCheckpointFormat) {
    throw failed("its metadata is not a zerolap checkpoint's");
  }
  CheckpointFacts facts;
  for (const auto& [key, field] : kFactKeys) {
    const std::optional<std::int64_t> value = parse_count(metadata_value(m.metadata, key));
    if (!value) {
      throw failed(fmt::format("metadata '{}' is missing or not a non-negative integer", key));
    }
    facts.*field = *value;
  }
  facts.config_toml = metadata_value(m.metadata, "config");
  if (facts.step != m.step || facts.optimizer_step > facts.step) {
    throw failed(
        fmt::format("metadata step {} / optimizer_step {} do not match the manifest's step {}",
                    facts.step, facts.optimizer_step, m.step));
  }
  check_checkpoint_facts(path, facts);  // what each fact means (checkpoint_values.h)
  return facts;
}

void verify_shard(const std::string& manifest_path, const ShardEntry& s) {
  const std::string file = complete_shard_path(manifest_path, s);
  const std::uint32_t crc = file_crc32(file);
  if (crc != s.crc32) {
    throw UserError(
        fmt::format("checkpoint shard '{}': CRC32 {} differs from {} in its manifest "
                    "'{}': the file is corrupt or belongs to another checkpoint",
                    file, crc_hex(crc), crc_hex(s.crc32), manifest_path));
  }
}

}  // namespace zl
