// Prefill attention (GQA / MHA, and MLA in its expanded form): a tiled flash-attention-style
// kernel on CUDA cores, written for correctness first. A block takes 16 queries of one head of
// one sequence (4 warps x 4 queries); key / value tiles of 32 rows are staged in shared memory
// as FP32 and each warp folds them into its queries' online-softmax state (attention_tile.cuh).
#include <cuda_bf16.h>

#include "engine/cuda/attention_tile.cuh"
#include "engine/cuda/check.h"
#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kQueriesPerWarp = 4;
constexpr int kQueriesPerBlock = kWarps * kQueriesPerWarp;

struct PrefillParams {
  AttentionShape shape;
  const bf16* q;
  const bf16* k;
  const bf16* v;
  const int32_t* q_start;
  const int32_t* num_new;
  const int32_t* num_ctx;
  const int32_t* cache_start;
  bf16* out;
};

__global__ void __launch_bounds__(kWarps* kWarpSize) attention_prefill_kernel(PrefillParams p) {
  const int seq = blockIdx.z;
  const int head = blockIdx.y;
  const int first_query = blockIdx.x * kQueriesPerBlock;
  const int num_new = p.num_new[seq];
  if (first_query >= num_new) return;  // whole block: uniform exit before any barrier
  const int num_ctx = p.num_ctx[seq];
  const int dk = p.shape.head_dim_qk;
  const int dv = p.shape.head_dim_v;
  const int kv_head = head / (p.shape.num_q_heads / p.shape.num_kv_heads);
  const int k_ld = dk + 1;  // odd stride: lane j reading row j hits distinct banks

  extern __shared__ float smem[];
  float* q_tile = smem;                            // [kQueriesPerBlock, dk]
  float* k_tile = q_tile + kQueriesPerBlock * dk;  // [kKeysPerTile, k_ld]
  float* v_tile = k_tile + kKeysPerTile * k_ld;    // [kKeysPerTile, dv]

  const float q_scale = p.shape.softmax_scale * kLog2e;
  const int64_t q_row_stride = static_cast<int64_t>(p.shape.num_q_heads) * dk;
  const bf16* q_base = p.q + (p.q_start[seq] + static_cast<int64_t>(first_query)) * q_row_stride +
                       static_cast<int64_t>(head) * dk;
  for (int idx = threadIdx.x; idx < kQueriesPerBlock * dk; idx += blockDim.x) {
    const int r = idx / dk;
    const int c = idx % dk;
    q_tile[idx] =
        first_query + r < num_new ? __bfloat162float(q_base[r * q_row_stride + c]) * q_scale : 0.0f;
  }

  const int warp = threadIdx.x / kWarpSize;
  QueryState state[kQueriesPerWarp];
  const int last_query = min(first_query + kQueriesPerBlock, num_new);  // exclusive
  const int num_keys = num_ctx + last_query;
  const int64_t k_row_stride = static_cast<int64_t>(p.shape.num_kv_heads) * dk;
  const int64_t v_row_stride = static_cast<int64_t>(p.shape.num_kv_heads) * dv;
  const bf16* k_base = p.k + static_cast<int64_t>(p.cache_start[seq]) * k_row_stride +
                       static_cast<int64_t>(kv_head) * dk;
  const bf16* v_base = p.v + static_cast<int64_t>(p.cache_start[seq]) * v_row_stride +
                       static_cast<int64_t>(kv_head) * dv;
  for (int key0 = 0; key0 < num_keys; key0 += kKeysPerTile) {
    const int rows = min(kKeysPerTile, num_keys - key0);
    __syncthreads();  // previous tile fully consumed (and q_tile written on the first pass)
    stage_rows(k_base + key0 * k_row_stride, k_row_stride, rows, dk, k_tile, k_ld);
    stage_rows(v_base + key0 * v_row_stride, v_row_stride, rows, dv, v_tile, dv);
    __syncthreads();
#pragma unroll
    for (int qi = 0; qi < kQueriesPerWarp; ++qi) {
      const int local = warp * kQueriesPerWarp + qi;
      const int query = first_query + local;
      if (query >= num_new) continue;                  // warp-uniform
      const int visible = num_ctx + query + 1 - key0;  // keys of this tile the query may see
      if (visible <= 0) continue;
      attend_tile(q_tile + local * dk, k_tile, k_ld, v_tile, dk, dv, min(visible, kKeysPerTile),
                  state[qi]);
    }
  }

  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int qi = 0; qi < kQueriesPerWarp; ++qi) {
    const int query = first_query + warp * kQueriesPerWarp + qi;
    if (query >= num_new) continue;
    const float inv_sum = 1.0f / state[qi].sum_exp;  // >= 1 key always visible
    bf16* out_row = p.out +
                    (p.q_start[seq] + static_cast<int64_t>(query)) * p.shape.num_q_heads * dv +
                    static_cast<int64_t>(head) * dv;
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) {
      const int d = lane + i * kWarpSize;
      if (d < dv) out_row[d] = __float2bfloat16(state[qi].acc[i] * inv_sum);
    }
  }
}

}  // namespace

void launch_attention_prefill(const AttentionShape& shape, const bf16* q, const bf16* k,
                              const bf16* v, const int32_t* q_start, const int32_t* num_new,
                              const int32_t* num_ctx, const int32_t* cache_start, int num_seqs,
                              int max_new_tokens, bf16* out, cudaStream_t stream) {
  if (num_seqs == 0 || max_new_tokens == 0) return;
  MOESIM_CUDA_REQUIRE(shape.num_kv_heads > 0 && shape.num_q_heads % shape.num_kv_heads == 0,
                      "num_q_heads must be a positive multiple of num_kv_heads");
  MOESIM_CUDA_REQUIRE(shape.head_dim_qk >= 1 && shape.head_dim_qk <= kMaxHeadDim &&
                          shape.head_dim_v >= 1 && shape.head_dim_v <= kMaxHeadDim,
                      "head dims must be in [1, 256]");
  MOESIM_CUDA_REQUIRE(num_seqs <= 65535 && shape.num_q_heads <= 65535, "grid too large");
  const size_t smem_bytes =
      sizeof(float) * (static_cast<size_t>(kQueriesPerBlock) * shape.head_dim_qk +
                       static_cast<size_t>(kKeysPerTile) * (shape.head_dim_qk + 1) +
                       static_cast<size_t>(kKeysPerTile) * shape.head_dim_v);
  MOESIM_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem_bytes)));
  const dim3 grid(static_cast<unsigned>(ceil_div(max_new_tokens, kQueriesPerBlock)),
                  static_cast<unsigned>(shape.num_q_heads), static_cast<unsigned>(num_seqs));
  const PrefillParams params{shape, q, k, v, q_start, num_new, num_ctx, cache_start, out};
  attention_prefill_kernel<<<grid, kWarps * kWarpSize, smem_bytes, stream>>>(params);
  MOESIM_CUDA_CHECK_LAUNCH();
}

}  // namespace moesim::engine::cuda
