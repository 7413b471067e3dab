// agree_on_facts (see rank_agreement.h): a hash exchange, then on a mismatch a gather of the
// facts so that every rank can name the same differences.
#include "runtime/comm/rank_agreement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>

#include "base/errors.h"
#include "runtime/comm/timed_mpi.h"

namespace zl {
namespace {

// At most this many differing facts are listed (the rest are counted): one wrong file or
// command line usually shows in a few keys.
constexpr std::size_t kMaxListed = 5;
constexpr std::size_t kMaxRanksListed = 8;

void put_field(std::string& out, const std::string& s) {
  out += std::to_string(s.size());
  out += ':';
  out += s;
}

std::string serialize(const std::vector<RankFact>& facts, bool with_detail) {
  std::string out;
  for (const RankFact& f : facts) {
    put_field(out, f.name);
    put_field(out, f.value);
    if (with_detail) put_field(out, f.detail);
  }
  return out;
}

std::vector<RankFact> deserialize(std::string_view text) {
  std::vector<RankFact> facts;
  auto field = [&text]() {
    const auto colon = text.find(':');
    ZL_CHECK(colon != std::string_view::npos, "malformed fact record");
    const auto n = static_cast<std::size_t>(std::stoull(std::string(text.substr(0, colon))));
    ZL_CHECK(colon + 1 + n <= text.size(), "truncated fact record");
    std::string s(text.substr(colon + 1, n));
    text.remove_prefix(colon + 1 + n);
    return s;
  };
  while (!text.empty()) {
    RankFact f;
    f.name = field();
    f.value = field();
    f.detail = field();
    facts.push_back(std::move(f));
  }
  return facts;
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

std::string rank_list(const std::vector<int>& ranks) {
  const std::size_t shown = std::min(ranks.size(), kMaxRanksListed);
  const auto end = ranks.begin() + static_cast<std::ptrdiff_t>(shown);
  std::string out = fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks",
                                fmt::join(ranks.begin(), end, ", "));
  if (ranks.size() > shown) out += fmt::format(" and {} more", ranks.size() - shown);
  return out;
}

}  // namespace

std::string describe_disagreement(const std::vector<std::vector<RankFact>>& facts) {
  // Names in first-seen order over the ranks (rank 0's order when all have the same names).
  std::vector<std::string> names;
  for (const auto& rank_facts : facts) {
    for (const RankFact& f : rank_facts) {
      if (std::find(names.begin(), names.end(), f.name) == names.end()) names.push_back(f.name);
    }
  }
  std::vector<std::string> lines;
  std::size_t differing = 0;
  for (const std::string& name : names) {
    // value -> (ranks, detail of the first of them), in order of first rank.
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    std::map<std::string, std::string> detail_of;
    for (std::size_t r = 0; r < facts.size(); ++r) {
      std::string value = "(absent)";
      for (const RankFact& f : facts[r]) {
        if (f.name == name) {
          value = f.value;
          detail_of.emplace(value, f.detail);
          break;
        }
      }
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == value; });
      if (it == groups.end()) it = groups.insert(it, {value, {}});
      it->second.push_back(static_cast<int>(r));
    }
    if (groups.size() < 2) continue;
    if (++differing > kMaxListed) continue;
    std::vector<std::string> sides;
    for (const auto& [value, ranks] : groups) {
      const std::string& detail = detail_of[value];
      sides.push_back(fmt::format("{} on {}{}", value, rank_list(ranks),
                                  detail.empty() ? "" : fmt::format(" ({})", detail)));
    }
    lines.push_back(fmt::format("  {}: {}", name, fmt::join(sides, "; ")));
  }
  if (differing == 0) return {};
  std::string more =
      differing > kMaxListed ? fmt::format("\n  ... and {} more", differing - kMaxListed) : "";
  return fmt::format(
      "the ranks disagree on {} of the facts every rank must share (the config keys that affect "
      "results, the data, the build):\n{}{}\nstart every rank with the same config, --set "
      "overrides, data and zerolap build",
      differing, fmt::join(lines, "\n"), more);
}

void agree_on_facts(const World& world, const std::vector<RankFact>& facts, double timeout_s) {
  if (world.size <= 1) return;
  const WaitLimit limit{world.rank, timeout_s};
  const std::uint64_t h = fnv1a(serialize(facts, /*with_detail=*/false));
  // max(h) and max(~h) = ~min(h): one all-reduce tells whether every hash is the same.
  std::uint64_t extremes[2] = {h, ~h};
  timed_allreduce(MPI_IN_PLACE, extremes, 2, MPI_UINT64_T, MPI_MAX, world.comm, limit,
                  "the start-up agreement on config, data and build");
  if (extremes[0] == ~extremes[1]) return;

  const std::string mine = serialize(facts, /*with_detail=*/true);
  if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max() / world.size)) {
    throw RuntimeFailure(fmt::format("rank {}: {} bytes of start-up facts are too many to gather",
                                     world.rank, mine.size()));
  }
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(world.size));
  timed_allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, world.comm, limit,
                  "gathering the sizes of the ranks' start-up facts");
  std::vector<int> offsets(lengths.size(), 0);
  std::int64_t total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += lengths[r];
  }
  ZL_CHECK(total <= std::numeric_limits<int>::max(), "{} bytes of facts", total);
  std::string all(static_cast<std::size_t>(total), '\0');
  timed_allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                   world.comm, limit, "gathering the ranks' start-up facts");
  std::vector<std::vector<RankFact>> by_rank;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    by_rank.push_back(deserialize(std::string_view(all).substr(
        static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r]))));
  }
  const std::string message = describe_disagreement(by_rank);
  // A hash collision of equal facts is impossible; different facts always produce a message.
  ZL_CHECK(!message.empty(), "start-up fact hashes differ but the facts agree");
  throw UserError(message);
}

}  // namespace zl
