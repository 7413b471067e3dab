// The element types zerolap stores: fp32 and bf16 (docs/design.md, "Precision"). A DType names
// the storage of a DeviceBuffer, a Tensor or a wire buffer; arithmetic is always fp32.
// DTypeOf<T> maps a C++ storage type (float, Bf16) to its DType for the typed accessors.
#pragma once

#include <cstdint>

namespace zl {

enum class DType : std::uint8_t { F32, BF16 };

constexpr std::int64_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

constexpr const char* dtype_name(DType t) { return t == DType::F32 ? "fp32" : "bf16"; }

struct Bf16;  // base/bf16.h

template <class T>
struct DTypeOf;  // undefined for types zerolap does not store
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct DTypeOf<Bf16> {
  static constexpr DType value = DType::BF16;
};
template <class T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

}  // namespace zl
