// ParameterStore: registration while a model is built, then one flat layout (Note [Flat layout]
// in parameter_store.h) and two zeroed allocations. After finalize() the layout never changes, so
// every pointer handed out (param_data, grad_tensor, bucket slices) stays valid for the store's
// lifetime, including across a move of the store (the buffers move, their memory does not).
#include "models/parameter_store.h"

#include <utility>

#include "base/errors.h"

namespace zl {
namespace {

std::int64_t round_up(std::int64_t n, std::int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

}  // namespace

void ParameterStore::mark_unread_in_backward(int id) {
  ZL_CHECK(!laid_out_, "parameter {} marked after lay_out() or finalize()", id);
  params_.at(static_cast<std::size_t>(id)).read_in_backward = false;
}

int ParameterStore::add(std::string name, std::vector<std::int64_t> shape) {
  // Models are built by code, not by users: a bad registration is a zerolap bug.
  ZL_CHECK(!laid_out_, "parameter '{}' registered after lay_out() or finalize()", name);
  ZL_CHECK(!name.empty(), "empty parameter name");
  ZL_CHECK(ids_by_name_.count(name) == 0, "parameter '{}' registered twice", name);
  // Tensor is 2-D: a parameter is a vector (1-D) or a matrix (2-D).
  ZL_CHECK(shape.size() == 1 || shape.size() == 2, "parameter '{}' has {} dimensions", name,
           shape.size());
  std::int64_t numel = 1;
  for (std::int64_t d : shape) {
    ZL_CHECK(d > 0, "parameter '{}' has a non-positive dimension {}", name, d);
    numel *= d;
  }
  ids_by_name_.emplace(name, count());  // every check passed: a refused name is never found
  ParameterInfo info;
  info.name = std::move(name);
  info.shape = std::move(shape);
  info.numel = numel;
  params_.push_back(std::move(info));
  return count() - 1;
}

void ParameterStore::lay_out(const LayoutPadding& padding) {
  ZL_CHECK(!finalized_, "lay_out() after finalize()");
  ZL_CHECK(padding.multiple > 0 && padding.multiple % kAlignFloats == 0,
           "layout padding to a multiple of {} elements (must be a multiple of {})",
           padding.multiple, kAlignFloats);
  std::vector<char> pad_after(params_.size(), 0);
  for (int id : padding.after) {
    ZL_CHECK(id >= 0 && id < count(), "layout padding after parameter {} of {}", id, count());
    pad_after[static_cast<std::size_t>(id)] = 1;
  }
  // Reverse registration order = the order backward finalises gradients (Note [Flat layout]).
  std::int64_t offset = 0;
  for (int id = count() - 1; id >= 0; --id) {
    params_[id].offset = offset;
    offset += round_up(params_[id].numel, kAlignFloats);
    if (pad_after[static_cast<std::size_t>(id)]) offset = round_up(offset, padding.multiple);
  }
  total_ = offset;
  laid_out_ = true;
}

void ParameterStore::finalize(DeviceKind device, DType param_dtype, const LayoutPadding& padding,
                              GradientStorage gradients, ParamStorage storage) {
  ZL_CHECK(!finalized_, "finalize() called twice");
  lay_out(padding);
  device_ = device;
  gradient_storage_ = gradients;
  storage_ = storage;
  grad_ptrs_.assign(params_.size(), nullptr);
  if (total_ > 0) {
    // DeviceBuffer zero-fills: padding starts (and stays) zero, and so do the gradients.
    data_ = DeviceBuffer(device, storage == ParamStorage::Flat ? total_ : 0, param_dtype);
    if (gradients == GradientStorage::Flat) {
      grad_ = DeviceBuffer(device, total_);
      for (std::size_t id = 0; id < params_.size(); ++id) {
        grad_ptrs_[id] = grad_.data() + params_[id].offset;
      }
    }
  } else {
    data_ = DeviceBuffer(device, 0, param_dtype);  // remembers the dtype
  }
  bound_.assign(params_.size(), nullptr);
  if (storage == ParamStorage::Flat && total_ > 0) {
    char* base = static_cast<char*>(data_.raw());
    for (std::size_t id = 0; id < params_.size(); ++id) {
      bound_[id] = base + params_[id].offset * dtype_size(param_dtype);
    }
  }
  finalized_ = true;
}

void ParameterStore::bind(const std::vector<int>& ids, void* base, std::int64_t base_offset) {
  ZL_CHECK(storage_ == ParamStorage::Gathered, "bind() on a store with flat parameters");
  const std::int64_t size = dtype_size(data_.dtype());
  for (int id : ids) {
    const std::int64_t at = params_.at(static_cast<std::size_t>(id)).offset - base_offset;
    ZL_CHECK(at >= 0, "parameter {} bound below its buffer", id);
    bound_[static_cast<std::size_t>(id)] = static_cast<char*>(base) + at * size;
  }
}

void ParameterStore::unbind(const std::vector<int>& ids) {
  ZL_CHECK(storage_ == ParamStorage::Gathered, "unbind() on a store with flat parameters");
  for (int id : ids) bound_[static_cast<std::size_t>(id)] = nullptr;
}

void ParameterStore::bind_gradient(int id, float* grad) {
  ZL_CHECK(finalized_ && gradient_storage_ == GradientStorage::Bound,
           "bind_gradient({}) on a store whose gradients are not bound by its owner", id);
  ZL_CHECK(id >= 0 && id < count() && grad != nullptr, "bind_gradient({}, {})", id,
           static_cast<const void*>(grad));
  grad_ptrs_[static_cast<std::size_t>(id)] = grad;
}

int ParameterStore::find(const std::string& name) const {
  const auto it = ids_by_name_.find(name);
  return it == ids_by_name_.end() ? -1 : it->second;
}

std::vector<int> ParameterStore::ids_in_layout_order() const {
  std::vector<int> ids;
  ids.reserve(params_.size());
  for (int id = count() - 1; id >= 0; --id) ids.push_back(id);
  return ids;
}

std::int64_t ParameterStore::parameter_numel() const {
  std::int64_t n = 0;
  for (const ParameterInfo& p : params_) n += p.numel;
  return n;
}

namespace {

Tensor view_at(const ParameterInfo& info, void* at, DType dtype, DeviceKind device) {
  const bool matrix = info.shape.size() == 2;
  return Tensor{at, matrix ? info.shape[0] : 1, matrix ? info.shape[1] : info.shape[0], device,
                dtype};
}

}  // namespace

Tensor ParameterStore::param_tensor(int id) {
  ZL_CHECK(finalized_, "param_tensor({}) before finalize()", id);
  return view_at(params_.at(id), bound_.at(static_cast<std::size_t>(id)), data_.dtype(), device_);
}

Tensor ParameterStore::grad_tensor(int id) {
  ZL_CHECK(finalized_, "grad_tensor({}) before finalize()", id);
  const ParameterInfo& info = params_.at(id);
  return view_at(info, param_grad(id), DType::F32, device_);
}

}  // namespace zl
