// Helpers for CUDA-vs-CPU tests: a skip when no device exists, and pairs of identical tensors
// on the CPU reference backend and the CUDA backend (fill_synthetic is bit-identical on both).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "tests/engine/test_util.h"

namespace moesim::engine::cuda::testing {

// Tolerances relative to the largest reference magnitude, by the dtype of the computation.
inline constexpr double kBf16Tolerance = 2e-2;
inline constexpr double kFp8Tolerance = 1e-1;

// Fixture: the CPU and CUDA backends; skips the test when no CUDA device is usable.
class CudaVsCpuTest : public ::testing::Test {
 public:  // used by the free helper functions of the tests
  void SetUp() override {
    if (!cuda_device_available()) {
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount: no device or no driver); "
                      "CUDA-vs-CPU comparison skipped";
    }
    cpu_ = make_backend("cpu");
    gpu_ = make_cuda_backend();
    cpu_pool_ = std::make_unique<engine::testing::TensorPool>(*cpu_);
    gpu_pool_ = std::make_unique<engine::testing::TensorPool>(*gpu_);
  }

  struct Pair {
    Tensor cpu;
    Tensor gpu;
  };
  // The same synthetic values on both backends (same seed sequence in both pools).
  Pair random(DType dtype, const Shape& shape, float scale = 0.5f) {
    return {cpu_pool_->random(dtype, shape, scale), gpu_pool_->random(dtype, shape, scale)};
  }
  Pair zeros(DType dtype, const Shape& shape) {
    return {cpu_pool_->zeros(dtype, shape), gpu_pool_->zeros(dtype, shape)};
  }
  Pair from(DType dtype, const Shape& shape, const std::vector<float>& values) {
    return {cpu_pool_->from(dtype, shape, values), gpu_pool_->from(dtype, shape, values)};
  }
  Pair ints(const Shape& shape, const std::vector<int32_t>& values) {
    return {cpu_pool_->ints(shape, values), gpu_pool_->ints(shape, values)};
  }
  // Relative max difference of the two sides (GPU against the CPU reference; a NaN fails).
  double diff(const Pair& p) {
    gpu_->synchronize();
    return engine::testing::max_rel_diff(gpu_pool_->read(p.gpu), cpu_pool_->read(p.cpu));
  }

  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<Backend> gpu_;
  std::unique_ptr<engine::testing::TensorPool> cpu_pool_;
  std::unique_ptr<engine::testing::TensorPool> gpu_pool_;
};

}  // namespace moesim::engine::cuda::testing
