// CheckedSize: a non-negative int64 count or byte figure whose every + and * is overflow-checked.
// Sizes derived from user input (layer products, parameter counts, bytes, activations) are
// computed with it, so a chain of products either is exact or says that it does not fit.
#pragma once

#include <cstdint>
#include <limits>

namespace zl {

class CheckedSize {
 public:
  constexpr CheckedSize() = default;
  // A negative value is not a size: it is treated as overflowed (never fits).
  constexpr CheckedSize(std::int64_t value) : value_(value), ok_(value >= 0) {}  // NOLINT

  constexpr bool ok() const { return ok_; }
  // Whether the figure was computed without overflow and is at most `limit`.
  constexpr bool fits(std::int64_t limit) const { return ok_ && value_ <= limit; }
  // The value; only meaningful when ok().
  constexpr std::int64_t value() const {
    return ok_ ? value_ : std::numeric_limits<std::int64_t>::max();
  }

  friend constexpr CheckedSize operator+(CheckedSize a, CheckedSize b) {
    CheckedSize out;
    out.ok_ = a.ok_ && b.ok_ && !__builtin_add_overflow(a.value_, b.value_, &out.value_);
    return out;
  }
  friend constexpr CheckedSize operator*(CheckedSize a, CheckedSize b) {
    CheckedSize out;
    out.ok_ = a.ok_ && b.ok_ && !__builtin_mul_overflow(a.value_, b.value_, &out.value_);
    return out;
  }
  CheckedSize& operator+=(CheckedSize b) { return *this = *this + b; }
  CheckedSize& operator*=(CheckedSize b) { return *this = *this * b; }

 private:
  std::int64_t value_ = 0;
  bool ok_ = true;
};

// `n` rounded up to a multiple of `align` (> 0), checked.
constexpr CheckedSize checked_round_up(CheckedSize n, std::int64_t align) {
  if (!n.ok()) return n;
  const CheckedSize padded = n + CheckedSize(align - 1);
  if (!padded.ok()) return padded;
  return CheckedSize(padded.value() / align * align);
}

}  // namespace zl
