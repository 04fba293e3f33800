// GEMMs of the CUDA backend through cuBLAS / cuBLASLt, in the engine's weight layout
// (engine/backend.h: weights [in, out], y = x W, row-major): one BF16 GEMM (cublasGemmEx), the
// routed experts' BF16 GEMMs in one grouped call (cublasGemmGroupedBatchedEx, falling back to a
// loop of cublasGemmEx where cuBLAS does not support the configuration; used_grouped_api() says
// which ran), and W8A8 FP8 E4M3 through cuBLASLt (sm_89 and newer), which needs the weights
// transposed to [out, in] and whose FP32 output is scaled per row and per expert as the CPU
// reference does. docs/cuda.md ("GEMMs").
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {

// y [rows, out_features] = x [rows, in_features] w [in_features, out_features]; y is BF16
// (y_fp32 false) or FP32. Row r of x starts at x + r * x_row_stride (0: in_features).
void linear(cublasHandle_t handle, const bf16* x, const bf16* w, void* y, bool y_fp32, int64_t rows,
            int in_features, int out_features, cudaStream_t stream, int64_t x_row_stride = 0);

// Owns cuBLAS / cuBLASLt handles, their workspace and the device pointer arrays of grouped
// calls. One per backend (not thread-safe).
class ExpertGemm {
 public:
  ExpertGemm();
  ~ExpertGemm();
  ExpertGemm(const ExpertGemm&) = delete;
  ExpertGemm& operator=(const ExpertGemm&) = delete;

  cublasHandle_t handle() const { return handle_; }

  // For every expert e with rows_per_expert[e] > 0: rows [o_e, o_e + rows_per_expert[e]) of
  // y [*, out_features] = the same rows of x [*, in_features] times w[e] ([in, out] BF16,
  // w + e * in * out), o_e the prefix sum of rows_per_expert.
  void grouped_linear_bf16(const bf16* x, const bf16* w, bf16* y,
                           const std::vector<int64_t>& rows_per_expert, int in_features,
                           int out_features, cudaStream_t stream);
  bool used_grouped_api() const { return used_grouped_api_; }

  // y_fp32 [rows, out_features] = x_fp8 [rows, in_features] w_t_fp8[out_features, in_features]^T
  // (unscaled FP8 products, FP32 accumulate). in_features and out_features multiples of 16.
  void fp8_linear(const fp8e4m3* x, const fp8e4m3* w_t, float* y, int64_t rows, int in_features,
                  int out_features, cudaStream_t stream);

 private:
  void ensure_pointer_capacity(size_t num_pointers);

  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t lt_handle_ = nullptr;
  void* lt_workspace_ = nullptr;
  size_t lt_workspace_bytes_ = 0;
  void** device_pointers_ = nullptr;  // [3 * capacity]: A, B, C arrays
  size_t pointer_capacity_ = 0;
  bool used_grouped_api_ = false;
};

}  // namespace moesim::engine::cuda
