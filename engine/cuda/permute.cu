// Token permutation by expert (gather), un-permutation (scatter) and the weighted combine of
// expert outputs. One block per output row; rows are copied with 16-byte vectors when the
// hidden size allows it. The permutation itself is planned on the host from the forced routing
// (engine/permutation.h): these kernels only move rows.
#include <cuda_bf16.h>

#include <algorithm>

#include "engine/cuda/check.h"
#include "engine/cuda/device_utils.cuh"
#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kBf16PerVector = 8;  // 16 bytes

__device__ __forceinline__ void copy_row(const bf16* __restrict__ src, bf16* __restrict__ dst,
                                         int hidden_size) {
  if (hidden_size % kBf16PerVector == 0) {
    const uint4* src_vec = reinterpret_cast<const uint4*>(src);
    uint4* dst_vec = reinterpret_cast<uint4*>(dst);
    for (int c = threadIdx.x; c < hidden_size / kBf16PerVector; c += blockDim.x) {
      dst_vec[c] = src_vec[c];
    }
  } else {
    for (int c = threadIdx.x; c < hidden_size; c += blockDim.x) dst[c] = src[c];
  }
}

__global__ void permute_rows_kernel(const bf16* __restrict__ in, const int32_t* __restrict__ src,
                                    bf16* __restrict__ out, int hidden_size) {
  const int64_t row = blockIdx.x;
  copy_row(in + static_cast<int64_t>(src[row]) * hidden_size, out + row * hidden_size, hidden_size);
}

__global__ void unpermute_rows_kernel(const bf16* __restrict__ in, const int32_t* __restrict__ dst,
                                      bf16* __restrict__ out, int hidden_size) {
  const int64_t row = blockIdx.x;
  copy_row(in + row * hidden_size, out + static_cast<int64_t>(dst[row]) * hidden_size, hidden_size);
}

__global__ void weighted_combine_kernel(const bf16* __restrict__ rows,
                                        const int32_t* __restrict__ row_idx,
                                        const float* __restrict__ weight,
                                        const bf16* __restrict__ residual, bf16* __restrict__ out,
                                        int top_k, int hidden_size) {
  const int64_t token = blockIdx.x;
  for (int c = threadIdx.x; c < hidden_size; c += blockDim.x) {
    float acc = residual != nullptr ? __bfloat162float(residual[token * hidden_size + c]) : 0.0f;
    for (int j = 0; j < top_k; ++j) {
      const int64_t r = row_idx != nullptr ? row_idx[token * top_k + j] : token * top_k + j;
      if (r < 0) continue;
      acc += weight[token * top_k + j] *
             __bfloat162float(rows[static_cast<int64_t>(r) * hidden_size + c]);
    }
    out[token * hidden_size + c] = __float2bfloat16(acc);
  }
}

void require_rows(int64_t num_rows, int hidden_size) {
  MOESIM_CUDA_REQUIRE(hidden_size > 0, "hidden_size must be positive");
  MOESIM_CUDA_REQUIRE(num_rows <= 0x7fffffff, "too many rows for one grid dimension");
}

}  // namespace

void launch_permute_rows(const bf16* in, const int32_t* src_row_idx, bf16* out,
                         int64_t num_out_rows, int hidden_size, cudaStream_t stream) {
  if (num_out_rows == 0) return;
  require_rows(num_out_rows, hidden_size);
  permute_rows_kernel<<<static_cast<unsigned>(num_out_rows), kThreads, 0, stream>>>(
      in, src_row_idx, out, hidden_size);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_unpermute_rows(const bf16* in, const int32_t* dst_row_idx, bf16* out,
                           int64_t num_in_rows, int hidden_size, cudaStream_t stream) {
  if (num_in_rows == 0) return;
  require_rows(num_in_rows, hidden_size);
  unpermute_rows_kernel<<<static_cast<unsigned>(num_in_rows), kThreads, 0, stream>>>(
      in, dst_row_idx, out, hidden_size);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_weighted_combine(const bf16* rows, const int32_t* row_idx, const float* weight,
                             const bf16* residual, bf16* out, int64_t num_tokens, int top_k,
                             int hidden_size, cudaStream_t stream) {
  if (num_tokens == 0) return;
  require_rows(num_tokens, hidden_size);
  MOESIM_CUDA_REQUIRE(top_k >= 1, "top_k must be positive");
  weighted_combine_kernel<<<static_cast<unsigned>(num_tokens), kThreads, 0, stream>>>(
      rows, row_idx, weight, residual, out, top_k, hidden_size);
  MOESIM_CUDA_CHECK_LAUNCH();
}

}  // namespace moesim::engine::cuda
