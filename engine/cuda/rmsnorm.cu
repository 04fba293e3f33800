// RMSNorm: one block per row, FP32 sum of squares reduced over the block, one BF16 rounding of
// the output. Memory-bound; rows are read twice (the second read hits L1/L2).
#include <cuda_bf16.h>

#include "engine/cuda/check.h"
#include "engine/cuda/device_utils.cuh"
#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void rmsnorm_kernel(const bf16* x, int64_t x_row_stride, const bf16* __restrict__ weight,
                               bf16* out, int64_t out_row_stride, int hidden_size, float epsilon) {
  __shared__ float scratch[32];
  const bf16* row = x + static_cast<int64_t>(blockIdx.x) * x_row_stride;
  bf16* out_row = out + static_cast<int64_t>(blockIdx.x) * out_row_stride;
  float sum_sq = 0.0f;
  for (int c = threadIdx.x; c < hidden_size; c += blockDim.x) {
    const float v = __bfloat162float(row[c]);
    sum_sq += v * v;
  }
  sum_sq = block_sum(sum_sq, scratch);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(hidden_size) + epsilon);
  for (int c = threadIdx.x; c < hidden_size; c += blockDim.x) {
    const float v = __bfloat162float(row[c]) * inv_rms * __bfloat162float(weight[c]);
    out_row[c] = __float2bfloat16(v);
  }
}

}  // namespace

void launch_rmsnorm(const bf16* x, int64_t x_row_stride, const bf16* weight, bf16* out,
                    int64_t out_row_stride, int64_t num_rows, int hidden_size, float epsilon,
                    cudaStream_t stream) {
  if (num_rows == 0) return;
  MOESIM_CUDA_REQUIRE(hidden_size > 0, "hidden_size must be positive");
  MOESIM_CUDA_REQUIRE(num_rows <= 0x7fffffff, "too many rows for one grid dimension");
  rmsnorm_kernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(
      x, x_row_stride, weight, out, out_row_stride, hidden_size, epsilon);
  MOESIM_CUDA_CHECK_LAUNCH();
}

}  // namespace moesim::engine::cuda
