#include "core/tensor.h"

#include <cstring>

#include "core/allocator.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/stream.h"
#include "core/stream_sanitizer.h"

namespace ddpb {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    DDPB_CHECK(d >= 0) << "negative dimension in shape " << shape_str(shape);
    DDPB_CHECK(d == 0 || n <= INT64_MAX / d) << "shape " << shape_str(shape) << " overflows";
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {
uintptr_t allocation_pool(const Device& device) {
  // CUDA blocks are cached per stream (see core/allocator.h); CPU memory has one pool.
  if (device.is_cpu()) return 0;
  return reinterpret_cast<uintptr_t>(current_stream(device).native_handle());
}
}  // namespace

Storage::Storage(const Device& device, size_t nbytes, Kind kind)
    : device_(device), nbytes_(nbytes), kind_(kind) {
  data_ = allocate();
}

Storage::~Storage() {
  if (data_ != nullptr) free_allocation();
}

void* Storage::allocate() const {
  if (kind_ == Kind::PinnedHost) return pinned_host_allocator().allocate(nbytes_);
  return device_allocator(device_).allocate(nbytes_, allocation_pool(device_));
}

void Storage::free_allocation() {
  // The sanitizer's history is of this allocation; a later one starts clean.
  if (sanitizer::enabled()) sanitizer::forget(this);
  if (kind_ == Kind::PinnedHost) {
    pinned_host_allocator().free(data_);
  } else {
    device_allocator(device_).free(data_);
  }
  data_ = nullptr;
}

void Storage::release(std::string owner) {
  if (data_ == nullptr) return;
  // A captured graph replays with the pointers it recorded: they must stay allocated.
  DDPB_CHECK(!capture_detail::capturing_on_this_thread())
      << "cannot release the storage of " << owner << " during a graph capture";
  free_allocation();
  released_by_ = std::move(owner);
}

void Storage::reallocate() {
  if (data_ != nullptr) return;
  DDPB_CHECK(!capture_detail::capturing_on_this_thread())
      << "cannot reallocate the storage of " << released_by_ << " during a graph capture";
  data_ = allocate();
  released_by_.clear();
}

Tensor Tensor::empty(const Shape& shape, DType dtype, const Device& device) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(device, std::max<size_t>(t.nbytes(), 1));
  capture_detail::keep_alive_if_capturing(device, t.storage_);
  return t;
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(Device::cpu(), std::max<size_t>(t.nbytes(), 1),
                                         Storage::Kind::PinnedHost);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, const Device& device) {
  Tensor t = empty(shape, dtype, device);
  ops::zero(t);
  return t;
}

// A CPU tensor is built on its own device: staging it on cpu:0 would move cpu:0's memory
// counters from another rank's thread while that rank measures them.
Tensor Tensor::from_floats(const std::vector<float>& values, const Shape& shape,
                           const Device& device) {
  DDPB_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape))
      << values.size() << " values for shape " << shape_str(shape);
  Tensor host = empty(shape, DType::F32, device.is_cpu() ? device : Device::cpu());
  // An empty vector may hold no buffer at all (memcpy forbids null even for 0 bytes).
  if (!values.empty()) std::memcpy(host.raw_data(), values.data(), values.size() * sizeof(float));
  if (sanitizer::enabled()) sanitizer::on_host_access("from_floats", host, /*write=*/true);
  return device.is_cpu() ? host : host.to(device);
}

Tensor Tensor::from_ints(const std::vector<int32_t>& values, const Shape& shape,
                         const Device& device) {
  DDPB_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape))
      << values.size() << " values for shape " << shape_str(shape);
  Tensor host = empty(shape, DType::I32, device.is_cpu() ? device : Device::cpu());
  // An empty vector may hold no buffer at all (memcpy forbids null even for 0 bytes).
  if (!values.empty()) std::memcpy(host.raw_data(), values.data(), values.size() * sizeof(int32_t));
  if (sanitizer::enabled()) sanitizer::on_host_access("from_ints", host, /*write=*/true);
  return device.is_cpu() ? host : host.to(device);
}

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  if (d < 0) d += n;
  DDPB_CHECK(d >= 0 && d < n) << "dimension " << d << " out of range for " << describe();
  return shape_[static_cast<size_t>(d)];
}

const Device& Tensor::device() const {
  DDPB_CHECK(storage_) << "undefined tensor has no device";
  return storage_->device();
}

void* Tensor::raw_data() const {
  DDPB_CHECK(storage_) << "undefined tensor has no data";
  DDPB_CHECK(storage_->data() != nullptr)
      << describe() << " has no memory: the storage of " << storage_->released_by()
      << " was freed (free_storage()); restore_storage() it before use (Note [Freeable "
         "parameters])";
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

Tensor Tensor::view(const Shape& shape) const {
  DDPB_CHECK(shape_numel(shape) == numel_)
      << "cannot view " << describe() << " as " << shape_str(shape);
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::flat_view(int64_t offset, const Shape& shape) const {
  int64_t n = shape_numel(shape);
  DDPB_CHECK(offset >= 0 && offset + n <= numel_)
      << "flat_view(" << offset << ", " << shape_str(shape) << ") outside " << describe();
  Tensor t = *this;
  t.offset_ = offset_ + offset;
  t.shape_ = shape;
  t.numel_ = n;
  return t;
}

Tensor Tensor::narrow(int64_t start, int64_t length) const {
  DDPB_CHECK(dim() >= 1 && start >= 0 && length >= 0 && start + length <= shape_[0])
      << "narrow(" << start << ", " << length << ") outside " << describe();
  Shape s = shape_;
  s[0] = length;
  int64_t row = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  return flat_view(start * row, s);
}

Tensor Tensor::to(const Device& device) const {
  Tensor t = empty(shape_, dtype_, device);
  ops::copy(*this, t);
  return t;
}

Tensor Tensor::clone() const {
  return to(device());
}

// A host view of `t`, after the work enqueued so far on the current stream of its device:
// on CUDA the device-to-host copy synchronises; a CPU device synchronises its stream too, so
// that host reads are ordered as they would be on a GPU (Note [Stream-order sanitizer]).
Tensor Tensor::host_copy_for_reading(const char* what) const {
  Tensor host = device().is_cpu() ? *this : to(Device::cpu());
  current_stream(device()).synchronize();
  if (sanitizer::enabled()) sanitizer::on_host_access(what, host, /*write=*/false);
  return host;
}

std::vector<float> Tensor::to_floats() const {
  Tensor host = host_copy_for_reading("to_floats");
  if (host.dtype() != DType::F32) {
    Tensor f = empty(shape_, DType::F32, host.device());
    ops::cast(host, f);
    host = f;
  }
  const float* p = host.data<float>();
  return std::vector<float>(p, p + numel_);
}

std::vector<int32_t> Tensor::to_ints() const {
  DDPB_CHECK(dtype_ == DType::I32) << "to_ints on " << describe();
  Tensor host = host_copy_for_reading("to_ints");
  const int32_t* p = host.data<int32_t>();
  return std::vector<int32_t>(p, p + numel_);
}

float Tensor::item() const {
  DDPB_CHECK(numel_ == 1) << "item() on " << describe();
  return to_floats()[0];
}

std::string Tensor::describe() const {
  if (!storage_) return "undefined tensor";
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " on " + storage_->device().str();
}

}  // namespace ddpb
