// overlong_key_line (see toml_key_parts.h): a scan of TOML's lexical structure, no parse; and
// the parse behind it.
#include "runtime/config/toml_key_parts.h"

#include <fmt/format.h>

#include "base/errors.h"

namespace zl {
namespace {

// The end of the string opened at `i` by the quote text[i] (basic, with escapes, or literal;
// multi-line when the quote is tripled), counting its line breaks into `line`. An unclosed
// string ends at its line break (a one-line string) or at the end of the text: the reader
// reports it.
std::size_t skip_string(std::string_view text, std::size_t i, std::size_t& line) {
  const char quote = text[i];
  const std::string_view triple = quote == '"' ? "\"\"\"" : "'''";
  const bool multi = text.substr(i, 3) == triple;
  i += multi ? 3 : 1;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\\' && quote == '"' && i + 1 < text.size()) {
      if (text[i + 1] == '\n') ++line;
      i += 2;
      continue;
    }
    if (c == '\n') {
      if (!multi) return i;  // the line break is the caller's
      ++line;
    }
    if (multi && text.substr(i, 3) == triple) return i + 3;
    if (!multi && c == quote) return i + 1;
    ++i;
  }
  return i;
}

}  // namespace

std::size_t overlong_key_line(std::string_view text) {
  std::size_t line = 1;
  std::size_t dots = 0;  // outside strings since the last delimiter: a key's parts - 1
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"' || c == '\'') {
      i = skip_string(text, i, line);
      continue;
    }
    if (c == '#') {  // a comment, to its line's end
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c == '.') {
      if (++dots + 1 > kMaxKeyParts) return line;
    } else if (c == '\n' || c == '=' || c == ',' || c == '[' || c == ']' || c == '{' ||
               c == '}') {
      dots = 0;
      if (c == '\n') ++line;
    }
    ++i;
  }
  return 0;
}

namespace {

[[noreturn]] void throw_key_too_deep(const std::string& where) {
  throw UserError(fmt::format("{}: a dotted key or table header of more than {} parts (the TOML "
                              "reader recurses once per part); a config's keys have two, "
                              "section.key",
                              where, kMaxKeyParts));
}

}  // namespace

void check_key_parts(std::string_view text, const std::string& where) {
  if (overlong_key_line(text) != 0) throw_key_too_deep(where);
}

toml::table parse_guarded(const std::string& text, const std::string& source_name) {
  if (const std::size_t line = overlong_key_line(text)) {
    throw_key_too_deep(fmt::format("{}:{}", source_name, line));
  }
  return toml::parse(text, source_name);
}

}  // namespace zl
