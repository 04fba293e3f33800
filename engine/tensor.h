// Device memory and tensor handles shared by every backend.
//
// A DeviceBuffer owns bytes on one backend's device (host memory for the CPU backend) and frees
// them through the deleter the backend gave it. A Tensor is a non-owning view: a pointer, a dtype
// and a row-major contiguous shape. Backend operations take Tensors (inputs and outputs alike,
// since a view's constness says nothing about the bytes it points to); a DeviceTensor bundles a
// buffer with its view for convenience.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/dtype.h"

namespace moesim::engine {

using Shape = std::vector<int64_t>;

// Number of elements of `shape` (1 for an empty shape: a scalar).
// Elements of a shape; INT64_MAX when the product overflows (allocating it is out of memory).
int64_t shape_num_elements(const Shape& shape);
// shape_num_elements(shape) x element_bytes, saturating at INT64_MAX the same way.
int64_t shape_size_bytes(const Shape& shape, int64_t element_bytes);
// "[2, 3, 4]".
std::string shape_to_string(const Shape& shape);

// Non-owning view of a contiguous row-major tensor on some backend's device.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kBF16;
  Shape shape;

  // True when the view points at nothing (an absent optional input).
  bool empty() const { return data == nullptr; }
  int64_t num_elements() const { return shape_num_elements(shape); }
  int64_t size_bytes() const { return shape_size_bytes(shape, dtype_size_bytes(dtype)); }
  // Extent of dimension `dim_idx`; negative indices count from the end (-1 is the last).
  int64_t dim(int dim_idx) const;
  // Number of rows when viewed as a matrix: the product of all but the last dimension.
  int64_t rows() const;
  // The last dimension (1 for a scalar).
  int64_t cols() const;
};

// Owning handle to device bytes; move-only. `deleter(data)` runs once when the buffer dies.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(void* data, int64_t size_bytes, std::function<void(void*)> deleter)
      : data_(data), size_bytes_(size_bytes), deleter_(std::move(deleter)) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      size_bytes_ = std::exchange(other.size_bytes_, 0);
      deleter_ = std::move(other.deleter_);
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  void* data() const { return data_; }
  int64_t size_bytes() const { return size_bytes_; }
  // Frees the bytes now (no-op when empty).
  void reset() {
    if (data_ != nullptr && deleter_) deleter_(data_);
    data_ = nullptr;
    size_bytes_ = 0;
  }

 private:
  void* data_ = nullptr;
  int64_t size_bytes_ = 0;
  std::function<void(void*)> deleter_;
};

// A tensor that owns its memory. `view` points into `buffer`.
struct DeviceTensor {
  DeviceBuffer buffer;
  Tensor view;

  const Tensor& operator*() const { return view; }
  const Tensor* operator->() const { return &view; }
};

}  // namespace moesim::engine
