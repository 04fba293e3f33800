#include "engine/tensor.h"

#include <limits>

#include "base/check.h"

namespace moesim::engine {

int64_t shape_num_elements(const Shape& shape) {
  // Saturates at INT64_MAX: an allocation of that size is refused as out of memory, never wrapped
  // into a small one.
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

int64_t shape_size_bytes(const Shape& shape, int64_t element_bytes) {
  int64_t bytes = 0;
  if (__builtin_mul_overflow(shape_num_elements(shape), element_bytes, &bytes)) {
    return std::numeric_limits<int64_t>::max();
  }
  return bytes;
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t Tensor::dim(int dim_idx) const {
  const int n = static_cast<int>(shape.size());
  const int i = dim_idx < 0 ? n + dim_idx : dim_idx;
  MOESIM_CHECK(i >= 0 && i < n, "tensor dimension index out of range");
  return shape[i];
}

int64_t Tensor::rows() const {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
  return n;
}

int64_t Tensor::cols() const { return shape.empty() ? 1 : shape.back(); }

}  // namespace moesim::engine
