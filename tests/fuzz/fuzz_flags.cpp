// Fuzz target: the command-line flags that set config keys (plan --link-gbps and --latency-us,
// applied as FlagOverride) and the sizes plan then computes. The input is lines: a --world, the
// value of --link-gbps, of --latency-us, then --set overrides. An accepted config must give a
// layout, a bucket plan and a memory estimate for that world without a crash or a negative figure.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "models/model.h"
#include "runtime/config/config.h"
#include "runtime/config/config_limits.h"
#include "runtime/train/plan/bucket_plan.h"
#include "runtime/train/plan/memory_estimate.h"
#include "runtime/train/plan/mode_plan.h"

namespace {

constexpr std::string_view kBase =
    "[model]\nwidths = [2, 8, 3]\n[data]\nkind = \"spirals\"\n[link]\nbandwidth_gbps = 10\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  while (!rest.empty()) {
    const auto end = rest.find('\n');
    lines.emplace_back(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
  }
  lines.resize(std::max<std::size_t>(lines.size(), 3));
  // --world as CLI11 checks it: an integer in [1, kMaxWorldSize]; anything else is refused there.
  char* end = nullptr;
  const long long world = std::strtoll(lines[0].c_str(), &end, 10);
  if (end == lines[0].c_str() || *end != '\0' || world < 1 || world > zl::kMaxWorldSize) return 0;
  std::vector<zl::FlagOverride> flags;
  if (!lines[1].empty()) flags.push_back({"--link-gbps", "link.bandwidth_gbps", lines[1]});
  if (!lines[2].empty()) flags.push_back({"--latency-us", "link.latency_us", lines[2]});
  const std::vector<std::string> overrides(lines.begin() + 3, lines.end());
  zl::Config config;
  try {
    config = zl::parse_config(std::string(kBase), "fuzz.toml", overrides, flags);
  } catch (const zl::UserError&) {
    return 0;
  }
  if (config.model.widths.size() > 64) return 0;  // bounded work per input
  const zl::ParameterStore layout = zl::Model::parameter_layout(config.model);
  const zl::ModePlan mode = zl::make_mode_plan(config.parallel, config.optimizer, config.precision);
  const zl::BucketPlan plan = zl::build_bucket_plan(
      layout, config.parallel.bucket_cap_mb, config.parallel.first_bucket_cap_mb,
      static_cast<int>(world), config.parallel.assignment);
  const zl::RankMemory m = zl::estimate_rank_memory(config, layout, plan, mode, 0);
  if (m.total() < 0 || m.activations < 0 || layout.total_numel() < 0) std::abort();
  return 0;
}
