// Flat parameter and gradient storage of a model. Every parameter and its gradient are views into
// two flat buffers, so a gradient bucket is just a slice and bucketing costs no copies.
//
// Note [Flat layout]: parameters are laid out in *reverse registration order* — the order in which
// backward finalises their gradients — so consecutive ready gradients are adjacent and every bucket
// (built in that same order) is one contiguous slice [offset, offset + numel). Each parameter starts
// on a kAlignFloats boundary (CUDA float4 loads); padding elements stay zero in params, grads and
// optimizer state (every update maps 0 -> 0 when g = 0 and p = 0).
//
// Precision (docs/design.md, "Precision"): the parameter buffer holds the model's dtype (fp32, or
// bf16 for a bf16 model: what forward and backward read and the optimizer's owner writes); the
// gradient buffer is always fp32 (weight-gradient GEMMs accumulate into it with beta = 1). The
// layout in elements is the same for both dtypes, so a bucket [offset, offset + numel) is the
// same slice of both; in bytes it starts at offset * dtype_size(param_dtype()) in the parameters.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/device_buffer.h"
#include "base/errors.h"
#include "models/tensor.h"

namespace zl {

// Padding of the flat layout beyond each parameter's own alignment: after each parameter in `after`
// (ids), the next offset is rounded up to a multiple of `multiple` elements (a multiple of
// kAlignFloats). ZeRO's element shards pad every bucket's end this way, so that a bucket splits
// into equal, aligned shards (runtime/train/plan/shard_layout.h). The padding is zero like the
// rest.
struct LayoutPadding {
  std::vector<int> after;
  std::int64_t multiple = 16;
};

// Where the parameter values live. Flat: the one flat buffer (every mode but ZeRO stage 3).
// Gathered (ZeRO stage 3, runtime/train/step/parameter_gather.h): no flat parameter buffer is
// allocated; a bucket's parameters are bound to the gather buffer its all-gather filled while
// forward or backward reads them, and unbound (null) when it is released.
enum class ParamStorage { Flat, Gathered };
// Where the parameters' gradients live. Flat: the store's flat fp32 buffer (every element).
// Bound: the store allocates none; its owner binds each parameter's gradient to memory of its own
// (bind_gradient) before any backward - ZeRO stage 2, whose backward writes each bucket into a
// buffer of a small pool (runtime/train/step/gradient_pool.h).
enum class GradientStorage { Flat, Bound };

struct ParameterInfo {
  std::string name;                 // PyTorch-style: "layers.0.weight"
  std::vector<std::int64_t> shape;  // Linear weight: {out_features, in_features}, as PyTorch
  std::int64_t numel = 0;
  std::int64_t offset = 0;          // first element in the flat buffers (see Note [Flat layout])
  // Backward reads the value (a Linear's weight for d(input), LayerNorm's gamma); biases and the
  // first layer's weight (nobody needs d(input)) are not. ZeRO stage 3 gathers a bucket in
  // backward only if one of its parameters is read there (Note [Parameter gathers]).
  bool read_in_backward = true;
};

class ParameterStore {
 public:
  static constexpr std::int64_t kAlignFloats = 16;  // 64 bytes

  // Registration happens while a model is built; finalize() lays out and allocates.
  // Returns the parameter id (index in registration order).
  int add(std::string name, std::vector<std::int64_t> shape);
  // Parameter `id`'s value is not read in backward (ParameterInfo::read_in_backward).
  void mark_unread_in_backward(int id);
  // Lays the parameters out (offsets, total_numel) without allocating: a store that only
  // describes a model, for plans and memory estimates of models too large to allocate.
  void lay_out(const LayoutPadding& padding = {});
  void finalize(DeviceKind device, DType param_dtype = DType::F32,
                const LayoutPadding& padding = {},
                GradientStorage gradients = GradientStorage::Flat,
                ParamStorage storage = ParamStorage::Flat);
  GradientStorage gradient_storage() const { return gradient_storage_; }
  // GradientStorage::Bound: parameter `id`'s gradient (numel fp32 elements) is at `grad` from
  // now on; the caller keeps that memory alive while the store is used.
  void bind_gradient(int id, float* grad);
  bool finalized() const { return finalized_; }
  bool laid_out() const { return laid_out_; }  // lay_out() or finalize() ran

  const std::vector<ParameterInfo>& parameters() const { return params_; }  // registration order
  int count() const { return static_cast<int>(params_.size()); }
  const ParameterInfo& info(int id) const { return params_.at(id); }
  int find(const std::string& name) const;  // -1 when absent

  // Ids in flat-layout order (reverse registration order): bucket construction walks this.
  std::vector<int> ids_in_layout_order() const;

  std::int64_t total_numel() const { return total_; }  // including alignment padding
  std::int64_t parameter_numel() const;                // excluding padding
  DeviceKind device() const { return device_; }
  DType param_dtype() const { return data_.dtype(); }
  // Bytes allocated for the flat parameters and gradients (0 before finalize()).
  std::int64_t param_bytes() const { return data_.bytes(); }
  std::int64_t grad_bytes() const { return grad_.bytes(); }

  // The flat parameters as T (float or Bf16; must be param_dtype(), else InternalError) and
  // untyped (collectives, checkpoints). The fp32 accessors below are for fp32 stores only.
  // Gathered storage has no flat parameters (null); param_as and param_slot give a parameter's
  // bound address in either storage.
  template <class T>
  T* params_as() const {
    return data_.data<T>();
  }
  template <class T>
  T* param_as(int id) const {
    ZL_CHECK(dtype_of<T> == data_.dtype(), "parameter {} read as {} from a {} store", id,
             dtype_name(dtype_of<T>), dtype_name(data_.dtype()));
    return static_cast<T*>(bound_.at(static_cast<std::size_t>(id)));
  }
  // Where parameter id's address is kept: a backward closure reads the parameter through it, so
  // it sees the buffer the parameter is bound to when backward runs (Gathered storage re-gathers
  // a bucket into whichever gather buffer is free). Stable for the store's lifetime.
  void* const* param_slot(int id) const { return &bound_.at(static_cast<std::size_t>(id)); }
  ParamStorage storage() const { return storage_; }
  // Gathered storage: binds every parameter in `ids` to `base` + (its offset - base_offset)
  // elements of param_dtype() (a gather buffer holding elements from base_offset on), or unbinds
  // them (null).
  void bind(const std::vector<int>& ids, void* base, std::int64_t base_offset);
  void unbind(const std::vector<int>& ids);
  void* raw_data() const { return data_.raw(); }

  float* data() { return data_.data(); }
  // The flat gradient buffer (GradientStorage::Flat; null when Bound, whose gradients are only
  // reachable per parameter).
  float* grad() { return grad_.data(); }
  const float* data() const { return data_.data(); }
  const float* grad() const { return grad_.data(); }
  float* param_data(int id) { return param_as<float>(id); }
  float* param_grad(int id) { return grad_ptrs_.at(static_cast<std::size_t>(id)); }
  const float* param_data(int id) const { return param_as<float>(id); }
  const float* param_grad(int id) const { return grad_ptrs_.at(static_cast<std::size_t>(id)); }
  // The parameter as a (rows, cols) view of param_dtype(): 2-D shapes as they are, 1-D as (1, n).
  // The gradient view is fp32.
  Tensor param_tensor(int id);
  Tensor grad_tensor(int id);

 private:
  std::vector<ParameterInfo> params_;
  // name -> id, for add's duplicate check and find: a generated model registers tens of thousands
  // of parameters, and a search through every earlier name per registration is quadratic.
  std::unordered_map<std::string, int> ids_by_name_;
  DeviceBuffer data_;
  DeviceBuffer grad_;
  std::vector<void*> bound_;  // [id]: where the parameter's values are (param_slot)
  std::vector<float*> grad_ptrs_;  // [id]: into grad_ (Flat) or bound by the owner (Bound)
  GradientStorage gradient_storage_ = GradientStorage::Flat;
  std::int64_t total_ = 0;
  DeviceKind device_ = DeviceKind::Cpu;
  ParamStorage storage_ = ParamStorage::Flat;
  bool finalized_ = false;
  bool laid_out_ = false;
};

}  // namespace zl
