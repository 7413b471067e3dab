// docs/config.md documents exactly the keys the config reader accepts: a key added to the reader
// without a line in the reference, or a documented key the reader no longer knows, fails here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "runtime/config/config.h"

namespace {

// The keys of docs/config.md's tables: a row `| **[section]** | | |` opens a section, and every
// backticked name in the first cell of a later row is one key of it (`betas`, `eps`).
std::set<std::string> documented_keys(const std::string& markdown) {
  std::set<std::string> keys;
  std::string section;
  const std::regex section_row(R"(^\|\s*\*\*\[([a-z_]+)\]\*\*\s*\|)");
  const std::regex key_row(R"(^\|([^|]*)\|)");
  const std::regex name("`([a-z_0-9]+)`");
  std::istringstream in(markdown);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, section_row)) {
      section = m[1];
    } else if (!section.empty() && std::regex_search(line, m, key_row)) {
      const std::string cell = m[1];
      for (auto it = std::sregex_iterator(cell.begin(), cell.end(), name);
           it != std::sregex_iterator(); ++it) {
        keys.insert(section + "." + (*it)[1].str());
      }
    }
  }
  return keys;
}

}  // namespace

TEST_CASE("docs/config.md lists every key the reader accepts, and no other", "[config][docs]") {
  std::ifstream file(std::string(ZEROLAP_SOURCE_DIR) + "/docs/config.md");
  REQUIRE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  const std::set<std::string> documented = documented_keys(text.str());

  const std::vector<std::string> accepted_list = zl::accepted_config_keys();
  const std::set<std::string> accepted(accepted_list.begin(), accepted_list.end());
  REQUIRE(accepted.size() > 50);  // the reader asked for every section's keys

  std::vector<std::string> undocumented, unknown;
  std::set_difference(accepted.begin(), accepted.end(), documented.begin(), documented.end(),
                      std::back_inserter(undocumented));
  std::set_difference(documented.begin(), documented.end(), accepted.begin(), accepted.end(),
                      std::back_inserter(unknown));
  INFO("accepted by the reader but not in docs/config.md: "
       << Catch::Detail::stringify(undocumented));
  INFO("in docs/config.md but not accepted by the reader: " << Catch::Detail::stringify(unknown));
  CHECK(undocumented.empty());
  CHECK(unknown.empty());
}

TEST_CASE("the documented-keys reader finds keys by section and several per row",
          "[config][docs]") {
  const std::string table =
      "| key | default | meaning |\n|---|---|---|\n| **[optimizer]** | | |\n"
      "| `betas`, `eps` | `[0.9, 0.999]`, `1e-8` | Adam |\n| **[train]** | | |\n"
      "| `steps` / `epochs` | `epochs = 1` | one of them |\n";
  const std::set<std::string> expected{"optimizer.betas", "optimizer.eps", "train.steps",
                                       "train.epochs"};
  CHECK(documented_keys(table) == expected);
}
