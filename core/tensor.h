// Tensor: a dtype, a shape, a device and a contiguous view into shared storage.
//
// Tensors are always contiguous (row-major). A view shares the storage of its base with an
// element offset; DDP uses views to point each gradient into a flat bucket buffer. Copying a
// Tensor copies the handle, never the data (like torch.Tensor).
//
// Memory comes from the device's CachingAllocator, from the pool of the stream that was
// current when the tensor was created.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace ddpb {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

// Owns one allocation; returns it to its allocator on destruction. The allocation can be
// released and brought back while the Storage, and every Tensor sharing it, lives on
// (Note [Freeable parameters] in core/autograd.h): FSDP frees a unit's parameters between
// its forward and its backward, while autograd's saved tensors still refer to them.
class Storage {
 public:
  enum class Kind { Device, PinnedHost };
  Storage(const Device& device, size_t nbytes, Kind kind = Kind::Device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }  // null while released
  size_t nbytes() const { return nbytes_; }
  const Device& device() const { return device_; }
  bool pinned() const { return kind_ == Kind::PinnedHost; }

  // Returns the allocation to its allocator, under the same stream rules as destruction
  // (core/allocator.h); nbytes() stays. Until reallocate(), reading any Tensor of this
  // storage throws, naming `owner` (what freed it, e.g. "parameter 'h.0.mlp.c_fc.weight'").
  // Not during a graph capture. Not thread-safe: the storage's owner calls it.
  void release(std::string owner);
  // A fresh allocation of nbytes() (uninitialised) from the pool of the current stream, in
  // the thread's memory category; a no-op while allocated.
  void reallocate();
  bool allocated() const { return data_ != nullptr; }
  // What released it (empty while allocated).
  const std::string& released_by() const { return released_by_; }

 private:
  void* allocate() const;
  void free_allocation();

  Device device_;
  size_t nbytes_;
  Kind kind_;
  void* data_ = nullptr;
  std::string released_by_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined

  // Uninitialised memory on `device`.
  static Tensor empty(const Shape& shape, DType dtype, const Device& device);
  // Page-locked host memory (a CPU tensor usable for async H2D/D2H copies).
  static Tensor empty_pinned(const Shape& shape, DType dtype);
  static Tensor zeros(const Shape& shape, DType dtype, const Device& device);
  // A CPU f32/i32 tensor holding `values` (copied), then moved to `device`.
  static Tensor from_floats(const std::vector<float>& values, const Shape& shape,
                            const Device& device = Device::cpu());
  static Tensor from_ints(const std::vector<int32_t>& values, const Shape& shape,
                          const Device& device = Device::cpu());

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  const Device& device() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* raw_data() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }

  // Same storage, new shape with the same numel.
  Tensor view(const Shape& shape) const;
  // Same storage: `numel(shape)` elements starting `offset` elements into this tensor.
  Tensor flat_view(int64_t offset, const Shape& shape) const;
  // Rows [start, start+length) along dim 0 (a view).
  Tensor narrow(int64_t start, int64_t length) const;
  // Shares storage with `other` (same data pointer)?
  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }

  // A fresh copy on `device` (same dtype). Ordered on the current streams; synchronous only
  // for transfers to pageable host memory.
  Tensor to(const Device& device) const;
  Tensor clone() const;
  // Copies this tensor to host memory and returns its values as floats (any float dtype)
  // or ints. Synchronises with the device's current stream.
  std::vector<float> to_floats() const;
  std::vector<int32_t> to_ints() const;
  float item() const;  // one-element float tensor

  std::string describe() const;  // "f32[64, 1024] on cpu:0"

 private:
  Tensor host_copy_for_reading(const char* what) const;

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;  // in elements
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
};

}  // namespace ddpb
