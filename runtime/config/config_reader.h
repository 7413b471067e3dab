// Typed, located access to the sections of a parsed TOML config (internal to runtime/config*).
// Every read checks the TOML type and a range and, on failure, throws UserError as
// "<where>: <section>.<key>: <what>", where <where> is "file:line" or "--set section.key".
#pragma once

#include <toml++/toml.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/config/config_names.h"

namespace zl::config_detail {

// An allowed interval of a number; the default allows every finite value.
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool max_exclusive = false;

  // Exact for every double and every int64 (a double would round integers beyond 2^53).
  bool contains(long double v) const;
  std::string describe() const;  // "must be > 0", "must be in [0, 1)"
};

inline Range at_least(double lo) { return {lo, Range{}.max, false, false}; }
inline Range above(double lo) { return {lo, Range{}.max, true, false}; }
inline Range closed(double lo, double hi) { return {lo, hi, false, false}; }
inline Range half_open(double lo, double hi) { return {lo, hi, false, true}; }
inline Range open_closed(double lo, double hi) { return {lo, hi, true, false}; }

// Where the keys of one config came from: the file name, the line of each key read so far, and
// which keys --set replaced. Messages of later cross-key checks use the recorded lines.
class ConfigSource {
 public:
  explicit ConfigSource(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  // `key` (a full key, or a section an override created) was set on the command line, where
  // `label` says ("--set optimizer.lr", "--link-gbps"), to the text `value` (as typed).
  void mark_override(const std::string& key, const std::string& label, std::string value = {}) {
    overrides_[key] = label;
    override_values_[key] = std::move(value);
  }
  bool is_override(const std::string& key) const { return overrides_.count(key) > 0; }
  // The text an override of `key` gave, as typed ("" when none).
  std::string override_value(const std::string& key) const {
    const auto it = override_values_.find(key);
    return it != override_values_.end() ? it->second : std::string();
  }
  // Whether the file or a flag set `full_key` (else it has its default).
  bool was_set(const std::string& full_key) const {
    return is_override(full_key) || recorded_.count(full_key) > 0;
  }
  void record(const std::string& full_key, const toml::node& node);
  // Every full key a section reader asked for, in reading order: the keys the reader accepts.
  void note_known(std::string full_key) { known_.push_back(std::move(full_key)); }
  const std::vector<std::string>& known_keys() const { return known_; }

  // The flag for an override ("--set key", "--link-gbps"), else the node's line, else the
  // recorded line of the key or of its section, else the file name alone.
  std::string location(const std::string& full_key, const toml::node* node = nullptr) const;

  // Throws UserError "<location>: <full_key>: <what>".
  [[noreturn]] void fail(const std::string& full_key, std::string_view what,
                         const toml::node* node = nullptr) const;

 private:
  std::string name_;
  std::map<std::string, std::string> overrides_;  // key -> the flag that set it
  std::map<std::string, std::string> override_values_;  // key -> the text it gave
  std::map<std::string, std::string> recorded_;   // full key -> "file:line"
  std::vector<std::string> known_;
};

// Reads the keys of one section. Each read registers the key as known, so finish() can reject
// the rest as unknown (with a did-you-mean). A missing key leaves the default in place.
class SectionReader {
 public:
  // The section `section` of `root`; where it is absent, every read keeps its default.
  SectionReader(ConfigSource& source, const toml::table& root, std::string section);

  bool has(std::string_view key) const;
  std::string full_key(std::string_view key) const { return section_ + "." + std::string(key); }

  void integer(std::string_view key, std::int64_t& out, Range range = {});
  void integer(std::string_view key, int& out, Range range = {});
  void integer(std::string_view key, std::uint64_t& out);           // >= 0 (seeds)
  template <std::floating_point T>  // float or double; accepts integers too
  void number(std::string_view key, T& out, Range range = {});
  void boolean(std::string_view key, bool& out);
  // A file or directory path (every string key is one): a string holding no NUL byte.
  void path(std::string_view key, std::string& out, bool allow_empty = true);
  // UserError at `node` when `text`, the value of path key `key`, holds a NUL byte: the C calls
  // that open it would stop there, at another file than the one the config names.
  void check_path(std::string_view key, const std::string& text, const toml::node& node) const;
  void integer_array(std::string_view key, std::vector<std::int64_t>& out);
  void string_array(std::string_view key, std::vector<std::string>& out);
  // An array of numbers each in `range`; `exact_size` > 0 requires that many; `allow_scalar`
  // also accepts a single number (as a one-element array).
  template <class T>
  void number_array(std::string_view key, std::vector<T>& out, Range range, std::size_t exact_size,
                    bool allow_scalar);

  template <class E, std::size_t N>
  void enumeration(std::string_view key, E& out, const EnumName<E> (&names)[N]) {
    if (const toml::node* node = get(key)) {
      const auto* text = node->as_string();
      if (text == nullptr) type_error(key, *node, "a string");
      out = named(key, names, *node, text->get());
    }
  }

  // One name of `names` or an array of them (a sweep): each must be a known name, none twice. An
  // empty array is the default (as to_toml writes an unset list).
  template <class E, std::size_t N>
  void enumeration_list(std::string_view key, std::vector<E>& out, const EnumName<E> (&names)[N]) {
    const toml::node* node = get(key);
    if (node == nullptr) return;
    std::vector<E> values;
    for (const toml::node* element : elements(*node)) {
      const auto* text = element->as_string();
      if (text == nullptr) {
        type_error(key, *element, "one of " + enum_choices(names) + " or a list of them");
      }
      const E value = named(key, names, *element, text->get());
      if (std::find(values.begin(), values.end(), value) != values.end()) {
        fail(key, "\"" + text->get() + "\" is listed twice", element);
      }
      values.push_back(value);
    }
    out = std::move(values);
  }

  // The node of `key` (registering it as known), or null when absent: for keys of several types.
  const toml::node* get(std::string_view key);
  [[noreturn]] void fail(std::string_view key, std::string_view what,
                         const toml::node* node = nullptr) const;
  [[noreturn]] void type_error(std::string_view key, const toml::node& node,
                               std::string_view expected) const;

  // Rejects every key of the section that no read asked for.
  void finish() const;

 private:
  std::int64_t checked_integer(std::string_view key, const toml::node& node, Range range) const;
  double checked_number(std::string_view key, const toml::node& node) const;
  // The value of the name `text` in `names`; UserError at `node` listing the names otherwise.
  template <class E, std::size_t N>
  E named(std::string_view key, const EnumName<E> (&names)[N], const toml::node& node,
          const std::string& text) const {
    const auto it = std::find_if(std::begin(names), std::end(names),
                                 [&](const auto& n) { return n.name == text; });
    if (it == std::end(names)) {
      fail(key,
           "expected one of " + enum_choices(names) + ", got \"" + escaped_excerpt(text) + "\"",
           &node);
    }
    return it->value;
  }
  // The elements of an array node, or the node itself when it is not one.
  static std::vector<const toml::node*> elements(const toml::node& node);

  ConfigSource& source_;
  const toml::table* table_;
  std::string section_;
  std::vector<std::string> known_;
};

// A node's type as messages name it: "float", "string".
std::string_view type_name(const toml::node& node);
// " (did you mean 'lr'?)" when a candidate is a plausible typo of `word`, else "".
std::string did_you_mean(std::string_view word, std::span<const std::string> candidates,
                         std::string_view open = "'", std::string_view close = "'");

}  // namespace zl::config_detail
