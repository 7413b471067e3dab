// Fuzz target: the TOML config reader with --set overrides (runtime/config). The input is TOML
// text, optionally followed by a line "#--set" and then one override per line. A config that
// parses must also survive its canonical round trip: parse_config(to_toml(c)) gives the same
// canonical text (config_toml.cpp's contract), else the fuzzer reports it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "runtime/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSeparator = "\n#--set\n";
  std::string toml_text(input);
  std::vector<std::string> overrides;
  if (const auto at = input.find(kSeparator); at != std::string_view::npos) {
    toml_text = std::string(input.substr(0, at));
    std::string_view rest = input.substr(at + kSeparator.size());
    while (!rest.empty()) {
      const auto end = rest.find('\n');
      overrides.emplace_back(rest.substr(0, end));
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    }
  }
  zl::Config config;
  try {
    config = zl::parse_config(toml_text, "fuzz.toml", overrides);
  } catch (const zl::UserError&) {
    return 0;  // rejected with a message: the expected outcome for most inputs
  }
  const std::string canonical = zl::to_toml(config);
  zl::Config again;
  try {
    again = zl::parse_config(canonical, "canonical.toml");
  } catch (const zl::UserError&) {
    std::abort();  // the canonical text of an accepted config must be accepted
  }
  if (zl::to_toml(again) != canonical) std::abort();  // and must read back to itself
  return 0;
}
