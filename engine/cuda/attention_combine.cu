// Merge of split-K partial attention results (GQA and MLA decode), one block per (row, head):
// a log-sum-exp weighted average of the splits' normalised outputs.
#include <cuda_bf16.h>

#include <algorithm>

#include "engine/cuda/check.h"
#include "engine/cuda/device_utils.cuh"
#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void combine_splits_kernel(const float* __restrict__ partial_out,
                                      const float* __restrict__ partial_lse2, int num_splits,
                                      int num_heads, int head_dim, bf16* __restrict__ out) {
  const int row = blockIdx.x / num_heads;
  const int head = blockIdx.x % num_heads;
  auto partial_idx = [&](int split) {
    return (static_cast<int64_t>(row) * num_splits + split) * num_heads + head;
  };
  float max_lse = -INFINITY;
  for (int s = 0; s < num_splits; ++s) max_lse = fmaxf(max_lse, partial_lse2[partial_idx(s)]);
  float weight_sum = 0.0f;
  for (int s = 0; s < num_splits; ++s) weight_sum += exp2f(partial_lse2[partial_idx(s)] - max_lse);
  const float inv_weight_sum = 1.0f / weight_sum;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < num_splits; ++s) {
      const float lse = partial_lse2[partial_idx(s)];
      if (lse == -INFINITY) continue;
      acc += exp2f(lse - max_lse) * partial_out[partial_idx(s) * head_dim + d];
    }
    out[(static_cast<int64_t>(row) * num_heads + head) * head_dim + d] =
        __float2bfloat16(acc * inv_weight_sum);
  }
}

}  // namespace

int decode_num_splits(int64_t num_blocks_per_split, int64_t max_kv_len, int num_sms) {
  constexpr int64_t kMaxSplits = 64;
  const int64_t wanted =
      ceil_div(2 * static_cast<int64_t>(num_sms), std::max<int64_t>(1, num_blocks_per_split));
  const int64_t max_by_tiles = std::max<int64_t>(1, ceil_div(max_kv_len, 32));
  return static_cast<int>(std::clamp<int64_t>(wanted, 1, std::min(kMaxSplits, max_by_tiles)));
}

void launch_combine_attention_splits(const float* partial_out, const float* partial_lse2,
                                     int num_rows, int num_splits, int num_heads, int head_dim,
                                     bf16* out, cudaStream_t stream) {
  if (num_rows == 0) return;
  MOESIM_CUDA_REQUIRE(num_splits >= 1 && num_heads >= 1 && head_dim >= 1,
                      "splits, heads and head_dim must be positive");
  const int64_t num_blocks = static_cast<int64_t>(num_rows) * num_heads;
  MOESIM_CUDA_REQUIRE(num_blocks <= 0x7fffffff, "too many (row, head) pairs");
  combine_splits_kernel<<<static_cast<unsigned>(num_blocks), kThreads, 0, stream>>>(
      partial_out, partial_lse2, num_splits, num_heads, head_dim, out);
  MOESIM_CUDA_CHECK_LAUNCH();
}

}  // namespace moesim::engine::cuda
