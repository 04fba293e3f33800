// MoE router: logits through cuBLAS (BF16 inputs, FP32 accumulate and output), then scoring and
// top-k selection in a small kernel, one warp per token. Each lane owns experts lane, lane + 32,
// ...; the k winners are found by k rounds of a warp-wide arg-max (ties to the lower index),
// with a per-lane bit mask of experts already taken.
#include <cuda_bf16.h>

#include "engine/cuda/check.h"
#include "engine/cuda/device_utils.cuh"
#include "engine/cuda/kernel_limits.h"
#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxExperts = kMaxRoutedExperts;  // 32 experts per lane: one 32-bit mask per lane

__global__ void router_topk_kernel(const float* __restrict__ logits,
                                   const float* __restrict__ correction_bias, RouterScoring scoring,
                                   bool normalize_weights, float routed_scaling,
                                   int32_t* __restrict__ topk_expert,
                                   float* __restrict__ topk_weight, int64_t num_tokens,
                                   int num_experts, int top_k) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t token = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / kWarpSize;
  if (token >= num_tokens) return;
  const float* row = logits + token * num_experts;

  // Softmax needs the row maximum and the sum of exponentials; sigmoid is element-wise.
  float row_max = -INFINITY;
  float row_sum = 1.0f;
  if (scoring == RouterScoring::kSoftmax) {
    for (int e = lane; e < num_experts; e += kWarpSize) row_max = fmaxf(row_max, row[e]);
    row_max = warp_max(row_max);
    float sum = 0.0f;
    for (int e = lane; e < num_experts; e += kWarpSize) sum += expf(row[e] - row_max);
    row_sum = warp_sum(sum);
  }
  auto score_of = [&](int e) {
    return scoring == RouterScoring::kSoftmax ? expf(row[e] - row_max) / row_sum
                                              : 1.0f / (1.0f + expf(-row[e]));
  };

  uint32_t taken_mask = 0;  // bit i: expert lane + 32 * i already chosen
  float chosen_sum = 0.0f;
  float my_weight = 0.0f;  // lane j < top_k keeps the j-th winner's weight
  int32_t my_expert = -1;
  for (int j = 0; j < top_k; ++j) {
    float best_key = -INFINITY;
    int best_expert = num_experts;  // sentinel larger than every valid index
    for (int i = 0, e = lane; e < num_experts; ++i, e += kWarpSize) {
      if (taken_mask & (1u << i)) continue;
      const float key = score_of(e) + (correction_bias != nullptr ? correction_bias[e] : 0.0f);
      if (key > best_key || (key == best_key && e < best_expert)) {
        best_key = key;
        best_expert = e;
      }
    }
#pragma unroll
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      const float other_key = __shfl_xor_sync(0xffffffffu, best_key, offset);
      const int other_expert = __shfl_xor_sync(0xffffffffu, best_expert, offset);
      if (other_key > best_key || (other_key == best_key && other_expert < best_expert)) {
        best_key = other_key;
        best_expert = other_expert;
      }
    }
    if (best_expert % kWarpSize == lane) taken_mask |= 1u << (best_expert / kWarpSize);
    const float weight = score_of(best_expert);
    chosen_sum += weight;
    if (lane == j) {
      my_weight = weight;
      my_expert = best_expert;
    }
  }
  if (lane < top_k) {
    const float scale = (normalize_weights ? 1.0f / chosen_sum : 1.0f) * routed_scaling;
    topk_expert[token * top_k + lane] = my_expert;
    topk_weight[token * top_k + lane] = my_weight * scale;
  }
}

}  // namespace

void launch_router_topk(const float* logits, const float* correction_bias, RouterScoring scoring,
                        bool normalize_weights, float routed_scaling, int32_t* topk_expert,
                        float* topk_weight, int64_t num_tokens, int num_experts, int top_k,
                        cudaStream_t stream) {
  if (num_tokens == 0) return;
  MOESIM_CUDA_REQUIRE(num_experts >= 1 && num_experts <= kMaxExperts,
                      "num_experts must be in [1, 1024]");
  MOESIM_CUDA_REQUIRE(top_k >= 1 && top_k <= kMaxTopK && top_k <= num_experts,
                      "top_k must be in [1, min(num_experts, 32)]");
  const int64_t num_blocks = ceil_div(num_tokens, kWarpsPerBlock);
  MOESIM_CUDA_REQUIRE(num_blocks <= 0x7fffffff, "too many tokens for one grid dimension");
  router_topk_kernel<<<static_cast<unsigned>(num_blocks), kWarpsPerBlock * kWarpSize, 0, stream>>>(
      logits, correction_bias, scoring, normalize_weights, routed_scaling, topk_expert, topk_weight,
      num_tokens, num_experts, top_k);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void router_logits(cublasHandle_t handle, const bf16* x, const bf16* router_weight, float* logits,
                   int64_t num_tokens, int hidden_size, int num_experts, cudaStream_t stream) {
  if (num_tokens == 0) return;
  MOESIM_CUDA_REQUIRE(num_tokens <= 0x7fffffff, "too many tokens for one cuBLAS call");
  MOESIM_CUBLAS_CHECK(cublasSetStream(handle, stream));
  const float alpha = 1.0f;
  const float beta = 0.0f;
  // Column-major view: logits^T [E, N] = W^T [E, H] (W [H, E] row-major is E x H column-major)
  // times x^T [H, N].
  MOESIM_CUBLAS_CHECK(cublasGemmEx(
      handle, CUBLAS_OP_N, CUBLAS_OP_N, num_experts, static_cast<int>(num_tokens), hidden_size,
      &alpha, router_weight, CUDA_R_16BF, num_experts, x, CUDA_R_16BF, hidden_size, &beta, logits,
      CUDA_R_32F, num_experts, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace moesim::engine::cuda
