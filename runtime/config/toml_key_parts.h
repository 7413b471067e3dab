// The guard before the TOML reader sees a text (a config file, a --set value, a saved
// config.toml or run.json's config in a run's directory): toml++ recurses once per part of a
// dotted key or table header ("a.b.c"), so a key of some 50,000 parts overflows its stack, a crash
// instead of an error (docs/config.md). A config's keys have two parts (section.key); one of more
// than kMaxKeyParts is bad input, refused before parsing. The bound leaves room under a small
// stack for the worst the reader then allows: 256 nested inline tables or arrays (its own limit),
// each with a key of kMaxKeyParts parts, read under 1 MiB.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <toml++/toml.h>

namespace zl {

inline constexpr std::size_t kMaxKeyParts = 16;

// The line (from 1) of the first key or table header of `text` with more than kMaxKeyParts
// parts; 0 when there is none. Dots inside strings and comments are not counted, and a value
// (a float, a time) holds at most one, so every valid config passes.
std::size_t overlong_key_line(std::string_view text);

// UserError "<where>: a dotted key or table header of more than kMaxKeyParts parts ..." when
// `text` has one.
void check_key_parts(std::string_view text, const std::string& where);

// toml::parse of `text`, a document named `source_name`, behind the guard: every document zerolap
// reads goes through it. UserError "<source_name>:<line>: ..." for a key too deep; the reader's
// own toml::parse_error for any other mistake.
toml::table parse_guarded(const std::string& text, const std::string& source_name);

}  // namespace zl
