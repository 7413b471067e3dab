// Typed, located reads of TOML config sections (see config_reader.h): type checks, ranges,
// unknown keys with a did-you-mean, and the "<where>: <key>: <what>" shape of every message.
#include "runtime/config/config_reader.h"

#include <fmt/format.h>

#include <cmath>
#include <type_traits>

namespace zl::config_detail {

namespace {

// A bound as a reader wants it: integers exactly up to 2^53, else 6 significant digits
// ("1.79769e+308", never all 309 digits of DBL_MAX).
std::string readable_bound(double v) {
  if (std::nearbyint(v) == v && std::fabs(v) <= 9007199254740992.0) {
    return fmt::format("{}", static_cast<std::int64_t>(v));
  }
  return fmt::format("{:.6g}", v);
}

// A value as messages print it: `1.5`, `"abc"`.
std::string describe_value(const toml::node& node) {
  if (auto v = node.as_integer()) return fmt::format("{}", v->get());
  if (auto v = node.as_floating_point()) return float_text(v->get());  // 64.0, not 64
  if (auto v = node.as_boolean()) return v->get() ? "true" : "false";
  if (auto v = node.as_string()) return fmt::format("\"{}\"", escaped_excerpt(v->get()));
  return std::string(type_name(node));
}

// Optimal-string-alignment distance: Levenshtein plus adjacent transpositions ("widht").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The values of an array of `T` (`what`: "integers", "strings"), each passed to `check(value,
// index, node)` in order: UserError at `key` when the node or an element has another type.
template <class T, class Check>
std::vector<T> array_of(const SectionReader& r, std::string_view key, const toml::node& node,
                        std::string_view what, Check&& check) {
  const auto* arr = node.as_array();
  if (arr == nullptr) {
    r.fail(key, fmt::format("expected an array of {}, got {}", what, type_name(node)), &node);
  }
  std::vector<T> values;
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const toml::node& element = *arr->get(i);
    const auto* v = element.as<T>();
    if (v == nullptr) {
      r.fail(key, fmt::format("expected an array of {}, got {} at index {}", what,
                              type_name(element), i),
             &element);
    }
    check(v->get(), i, element);
    values.push_back(v->get());
  }
  return values;
}

}  // namespace

bool Range::contains(long double v) const {
  // long double holds every int64 exactly (64-bit or wider mantissa), as it does every double and
  // each bound. NaN compares false with every bound, so it is in no range.
  static_assert(std::numeric_limits<long double>::digits >= 64, "int64 bounds need exact compares");
  const long double lo = min, hi = max;
  return (min_exclusive ? v > lo : v >= lo) && (max_exclusive ? v < hi : v <= hi);
}

std::string Range::describe() const {
  const bool has_min = std::isfinite(min), has_max = std::isfinite(max);
  if (has_min && has_max) {
    return fmt::format("must be in {}{}, {}{}", min_exclusive ? '(' : '[', readable_bound(min),
                       readable_bound(max), max_exclusive ? ')' : ']');
  }
  if (has_min) return fmt::format("must be {} {}", min_exclusive ? ">" : ">=", readable_bound(min));
  if (has_max) return fmt::format("must be {} {}", max_exclusive ? "<" : "<=", readable_bound(max));
  return "must be a finite number";
}

void ConfigSource::record(const std::string& full_key, const toml::node& node) {
  if (node.source().begin.line > 0) {
    recorded_[full_key] = fmt::format("{}:{}", name_, node.source().begin.line);
  }
}

std::string ConfigSource::location(const std::string& full_key, const toml::node* node) const {
  if (auto it = overrides_.find(full_key); it != overrides_.end()) return it->second;
  if (node != nullptr && node->source().begin.line > 0) {
    return fmt::format("{}:{}", name_, node->source().begin.line);
  }
  if (auto it = recorded_.find(full_key); it != recorded_.end()) return it->second;
  if (auto it = recorded_.find(full_key.substr(0, full_key.find('.'))); it != recorded_.end()) {
    return it->second;
  }
  return name_;
}

void ConfigSource::fail(const std::string& full_key, std::string_view what,
                        const toml::node* node) const {
  throw UserError(fmt::format("{}: {}: {}", location(full_key, node), full_key, what));
}

std::string_view type_name(const toml::node& node) {
  // Indexed by toml::node_type, whose order (none first, date_time last) this relies on.
  static_assert(static_cast<int>(toml::node_type::date_time) == 9);
  static constexpr std::string_view kNames[] = {"nothing", "table", "array", "string", "integer",
                                                "float", "boolean", "date", "time", "date-time"};
  return kNames[static_cast<std::size_t>(node.type())];
}

std::string did_you_mean(std::string_view word, std::span<const std::string> candidates,
                         std::string_view open, std::string_view close) {
  // One edit for short words, else up to a third of the word (2 or 3): "lrr" suggests "lr" and
  // "widht" suggests "widths", but "x" suggests nothing.
  const std::size_t limit = word.size() <= 3 ? 1 : std::clamp<std::size_t>(word.size() / 3, 2, 3);
  const std::string* best = nullptr;
  std::size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = &c;
    }
  }
  if (best == nullptr) return "";
  return fmt::format(" (did you mean {}{}{}?)", open, *best, close);
}

SectionReader::SectionReader(ConfigSource& source, const toml::table& root, std::string section)
    : source_(source), table_(root[section].as_table()), section_(std::move(section)) {
  if (table_ != nullptr) source_.record(section_, *table_);
}

std::vector<const toml::node*> SectionReader::elements(const toml::node& node) {
  const auto* arr = node.as_array();
  if (arr == nullptr) return {&node};
  std::vector<const toml::node*> out;
  for (std::size_t i = 0; i < arr->size(); ++i) out.push_back(arr->get(i));
  return out;
}

bool SectionReader::has(std::string_view key) const {
  return table_ != nullptr && table_->get(key) != nullptr;
}

const toml::node* SectionReader::get(std::string_view key) {
  known_.emplace_back(key);
  source_.note_known(full_key(key));
  const toml::node* node = table_ != nullptr ? table_->get(key) : nullptr;
  if (node != nullptr) source_.record(full_key(key), *node);
  return node;
}

void SectionReader::fail(std::string_view key, std::string_view what,
                         const toml::node* node) const {
  source_.fail(full_key(key), what, node);
}

void SectionReader::type_error(std::string_view key, const toml::node& node,
                               std::string_view expected) const {
  std::string got(type_name(node));
  if (node.is_value()) got += " (" + describe_value(node) + ")";
  // --set reads its value as TOML: `--set output.dir=123` is an integer, a date a date.
  const std::string typed = source_.override_value(full_key(key));
  const bool quote = expected == "a string" && node.is_value() && !typed.empty();
  fail(key,
       fmt::format("expected {}, got {}{}", expected, got,
                   quote ? fmt::format("; quote a string: --set '{}=\"{}\"'", full_key(key),
                                       escaped_excerpt(typed, 60, Quotes::AsIs))
                         : std::string()),
       &node);
}

std::int64_t SectionReader::checked_integer(std::string_view key, const toml::node& node,
                                            Range range) const {
  const auto* v = node.as_integer();
  if (v == nullptr) type_error(key, node, "an integer");
  if (!range.contains(v->get())) {
    fail(key, fmt::format("{} (got {})", range.describe(), v->get()), &node);
  }
  return v->get();
}

double SectionReader::checked_number(std::string_view key, const toml::node& node) const {
  // Integers are accepted where a float is expected (lr = 1); the reverse is an error.
  if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
  if (const auto* f = node.as_floating_point()) return f->get();
  type_error(key, node, "a number");
}

void SectionReader::integer(std::string_view key, std::int64_t& out, Range range) {
  if (const auto* node = get(key)) out = checked_integer(key, *node, range);
}

void SectionReader::integer(std::string_view key, int& out, Range range) {
  range.max = std::min<double>(range.max, std::numeric_limits<int>::max());
  range.min = std::max<double>(range.min, std::numeric_limits<int>::min());
  if (const auto* node = get(key)) out = static_cast<int>(checked_integer(key, *node, range));
}

void SectionReader::integer(std::string_view key, std::uint64_t& out) {
  if (const auto* node = get(key)) {
    out = static_cast<std::uint64_t>(checked_integer(key, *node, at_least(0)));
  }
}

template <std::floating_point T>
void SectionReader::number(std::string_view key, T& out, Range range) {
  const auto* node = get(key);
  if (node == nullptr) return;
  const double v = checked_number(key, *node);
  // The range applies to the value the run will use: lr = 1e-50 is 0 in float and rejected.
  const T t = static_cast<T>(v);
  const char* finite = std::is_same_v<T, float> ? "finite 32-bit float" : "finite number";
  if (!std::isfinite(t)) fail(key, fmt::format("must be a {} (got {})", finite, v), node);
  if (!range.contains(t)) fail(key, fmt::format("{} (got {})", range.describe(), v), node);
  out = t;
}

template void SectionReader::number<float>(std::string_view, float&, Range);
template void SectionReader::number<double>(std::string_view, double&, Range);

void SectionReader::boolean(std::string_view key, bool& out) {
  if (const auto* node = get(key)) {
    const auto* v = node->as_boolean();
    if (v == nullptr) type_error(key, *node, "true or false");
    out = v->get();
  }
}

void SectionReader::path(std::string_view key, std::string& out, bool allow_empty) {
  if (const auto* node = get(key)) {
    const auto* v = node->as_string();
    if (v == nullptr) type_error(key, *node, "a string");
    if (!allow_empty && v->get().empty()) fail(key, "must not be empty", node);
    check_path(key, v->get(), *node);
    out = v->get();
  }
}

void SectionReader::check_path(std::string_view key, const std::string& text,
                               const toml::node& node) const {
  const std::size_t at = text.find('\0');
  if (at == std::string::npos) return;
  fail(key,
       fmt::format("a path cannot hold a NUL byte (\\u0000, at byte {} of \"{}\")", at,
                   escaped_excerpt(text)),
       &node);
}

void SectionReader::integer_array(std::string_view key, std::vector<std::int64_t>& out) {
  if (const auto* node = get(key)) {
    out = array_of<std::int64_t>(*this, key, *node, "integers", [](auto&&...) {});
  }
}

void SectionReader::string_array(std::string_view key, std::vector<std::string>& out) {
  if (const auto* node = get(key)) {
    out = array_of<std::string>(*this, key, *node, "strings",
                                [&](const std::string& v, std::size_t i, const toml::node& e) {
                                  if (v.empty()) {
                                    fail(key, fmt::format("element {} must not be empty", i), &e);
                                  }
                                });
  }
}

template <class T>
void SectionReader::number_array(std::string_view key, std::vector<T>& out, Range range,
                                 std::size_t exact_size, bool allow_scalar) {
  const auto* node = get(key);
  if (node == nullptr) return;
  if (!node->is_array() && !(allow_scalar && node->is_number())) {
    fail(key,
         fmt::format("expected an array of numbers{}, got {}", allow_scalar ? " or a number" : "",
                     type_name(*node)),
         node);
  }
  const std::vector<const toml::node*> items = elements(*node);
  if (exact_size > 0 && items.size() != exact_size) {
    fail(key, fmt::format("expected {} numbers, got {}", exact_size, items.size()), node);
  }
  std::vector<T> values;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const toml::node& element = *items[i];
    if (!element.is_number()) {
      fail(key,
           fmt::format("expected an array of numbers, got {} at index {}", type_name(element), i),
           &element);
    }
    const double v = checked_number(key, element);
    const T t = static_cast<T>(v);
    if (!std::isfinite(t) || !range.contains(t)) {
      fail(key, fmt::format("element {} {} (got {})", i, range.describe(), v), &element);
    }
    values.push_back(t);
  }
  out = std::move(values);
}

template void SectionReader::number_array<float>(std::string_view, std::vector<float>&, Range,
                                                 std::size_t, bool);
template void SectionReader::number_array<double>(std::string_view, std::vector<double>&, Range,
                                                  std::size_t, bool);

void SectionReader::finish() const {
  if (table_ == nullptr) return;
  for (const auto& [key, node] : *table_) {
    if (std::find(known_.begin(), known_.end(), key.str()) != known_.end()) continue;
    const std::string full = full_key(key.str());
    throw UserError(fmt::format("{}: unknown key '{}'{}", source_.location(full, &node),
                                escaped_excerpt(full),
                                did_you_mean(key.str(), known_)));
  }
}

}  // namespace zl::config_detail
