// Helpers for engine tests: host tensors on the CPU backend filled with seeded values, and
// element access in FP32.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend.h"
#include "engine/synthetic.h"

namespace moesim::engine::testing {

class TensorPool {
 public:
  explicit TensorPool(Backend& backend) : backend_(backend) {}

  // A tensor filled with synthetic values in [-scale, scale) (rounded to dtype).
  Tensor random(DType dtype, const Shape& shape, float scale = 0.5f) {
    tensors_.push_back(backend_.allocate(dtype, shape, "test"));
    backend_.fill_synthetic(tensors_.back().view, next_seed_++, scale);
    return tensors_.back().view;
  }
  // A tensor of zeros.
  Tensor zeros(DType dtype, const Shape& shape) {
    tensors_.push_back(backend_.allocate(dtype, shape, "test"));
    std::vector<char> zero(tensors_.back().view.size_bytes(), 0);
    backend_.upload(zero.data(), tensors_.back().view);
    return tensors_.back().view;
  }
  // A tensor holding `values` (rounded to dtype).
  Tensor from(DType dtype, const Shape& shape, const std::vector<float>& values) {
    tensors_.push_back(upload_floats(backend_, values, dtype, shape, "test"));
    return tensors_.back().view;
  }
  Tensor ints(const Shape& shape, const std::vector<int32_t>& values) {
    tensors_.push_back(upload_ints(backend_, values, shape, "test"));
    return tensors_.back().view;
  }
  std::vector<float> read(const Tensor& t) { return download_floats(backend_, t); }

 private:
  Backend& backend_;
  std::vector<DeviceTensor> tensors_;
  uint64_t next_seed_ = 1000;
};

// Largest |a - b| relative to the largest |b| (b is the reference). Not relative to max(1, ...):
// for outputs well below 1 that would make the tolerance absolute, passed by an all-zero result.
// An all-zero reference compares absolutely; a NaN on either side fails (std::max would drop it).
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double scale = 0.0;
  double diff = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= diff)) diff = d;  // a NaN sticks
  }
  return scale > 0.0 ? diff / scale : diff;
}

// Row-major [rows, cols] product of A [rows, inner] and B [inner, cols] in double.
inline std::vector<double> matmul(const std::vector<float>& a, const std::vector<float>& b,
                                  int64_t rows, int64_t inner, int64_t cols) {
  std::vector<double> c(rows * cols, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < inner; ++k) {
      const double aik = a[i * inner + k];
      for (int64_t j = 0; j < cols; ++j) c[i * cols + j] += aik * b[k * cols + j];
    }
  }
  return c;
}

}  // namespace moesim::engine::testing
