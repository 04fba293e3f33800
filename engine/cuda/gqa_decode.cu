// GQA decode, split-K over the context: a block takes up to 16 query heads sharing one KV head
// (4 warps x 4 heads) for one query row and one context range, so each key / value tile is read
// once for the whole group. Every split writes its normalised output and log2-sum-exp2; the
// combine kernel (attention_combine.cu) merges them.
#include <cuda_bf16.h>

#include "engine/cuda/attention_tile.cuh"
#include "engine/cuda/check.h"
#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kHeadsPerWarp = 4;
constexpr int kHeadsPerBlock = kWarps * kHeadsPerWarp;

struct DecodeParams {
  AttentionShape shape;
  const bf16* q;
  const bf16* k;
  const bf16* v;
  const int32_t* cache_start;
  const int32_t* kv_len;
  int num_splits;
  int head_chunks_per_kv_head;
  float* partial_out;   // [num_queries, num_splits, num_q_heads, dv]
  float* partial_lse2;  // [num_queries, num_splits, num_q_heads]
};

__global__ void __launch_bounds__(kWarps* kWarpSize) gqa_decode_kernel(DecodeParams p) {
  const int row = blockIdx.z;
  const int split = blockIdx.y;
  const int kv_head = blockIdx.x / p.head_chunks_per_kv_head;
  const int group = p.shape.num_q_heads / p.shape.num_kv_heads;
  const int first_in_group = (blockIdx.x % p.head_chunks_per_kv_head) * kHeadsPerBlock;
  const int num_heads_here = min(kHeadsPerBlock, group - first_in_group);
  const int first_head = kv_head * group + first_in_group;
  const int dk = p.shape.head_dim_qk;
  const int dv = p.shape.head_dim_v;
  const int k_ld = dk + 1;

  const int kv_len = p.kv_len[row];
  const int split_len = static_cast<int>(ceil_div(kv_len, p.num_splits));
  const int key_begin = min(kv_len, split * split_len);
  const int key_end = min(kv_len, key_begin + split_len);

  extern __shared__ float smem[];
  float* q_tile = smem;                          // [kHeadsPerBlock, dk]
  float* k_tile = q_tile + kHeadsPerBlock * dk;  // [kKeysPerTile, k_ld]
  float* v_tile = k_tile + kKeysPerTile * k_ld;  // [kKeysPerTile, dv]

  const float q_scale = p.shape.softmax_scale * kLog2e;
  const bf16* q_base = p.q + (static_cast<int64_t>(row) * p.shape.num_q_heads + first_head) * dk;
  for (int idx = threadIdx.x; idx < kHeadsPerBlock * dk; idx += blockDim.x) {
    q_tile[idx] = idx / dk < num_heads_here ? __bfloat162float(q_base[idx]) * q_scale : 0.0f;
  }

  const int warp = threadIdx.x / kWarpSize;
  QueryState state[kHeadsPerWarp];
  const int64_t k_row_stride = static_cast<int64_t>(p.shape.num_kv_heads) * dk;
  const int64_t v_row_stride = static_cast<int64_t>(p.shape.num_kv_heads) * dv;
  const bf16* k_base = p.k + static_cast<int64_t>(p.cache_start[row]) * k_row_stride +
                       static_cast<int64_t>(kv_head) * dk;
  const bf16* v_base = p.v + static_cast<int64_t>(p.cache_start[row]) * v_row_stride +
                       static_cast<int64_t>(kv_head) * dv;
  for (int key0 = key_begin; key0 < key_end; key0 += kKeysPerTile) {
    const int rows = min(kKeysPerTile, key_end - key0);
    __syncthreads();
    stage_rows(k_base + key0 * k_row_stride, k_row_stride, rows, dk, k_tile, k_ld);
    stage_rows(v_base + key0 * v_row_stride, v_row_stride, rows, dv, v_tile, dv);
    __syncthreads();
#pragma unroll
    for (int hi = 0; hi < kHeadsPerWarp; ++hi) {
      const int local = warp * kHeadsPerWarp + hi;
      if (local >= num_heads_here) continue;  // warp-uniform
      attend_tile(q_tile + local * dk, k_tile, k_ld, v_tile, dk, dv, rows, state[hi]);
    }
  }

  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int hi = 0; hi < kHeadsPerWarp; ++hi) {
    const int local = warp * kHeadsPerWarp + hi;
    if (local >= num_heads_here) continue;
    const int head = first_head + local;
    const int64_t out_idx =
        (static_cast<int64_t>(row) * p.num_splits + split) * p.shape.num_q_heads + head;
    const bool empty = key_begin >= key_end;
    const float inv_sum = empty ? 0.0f : 1.0f / state[hi].sum_exp;
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) {
      const int d = lane + i * kWarpSize;
      if (d < dv) p.partial_out[out_idx * dv + d] = state[hi].acc[i] * inv_sum;
    }
    if (lane == 0) {
      p.partial_lse2[out_idx] = empty ? -INFINITY : state[hi].max_score + log2f(state[hi].sum_exp);
    }
  }
}

}  // namespace

int64_t gqa_decode_workspace_bytes(const AttentionShape& shape, int num_queries, int num_splits) {
  const int64_t partials = static_cast<int64_t>(num_queries) * num_splits * shape.num_q_heads;
  return partials * (shape.head_dim_v + 1) * static_cast<int64_t>(sizeof(float));
}

void launch_gqa_decode(const AttentionShape& shape, const bf16* q, const bf16* k, const bf16* v,
                       const int32_t* cache_start, const int32_t* kv_len, int num_queries,
                       int num_splits, void* workspace, bf16* out, cudaStream_t stream) {
  if (num_queries == 0) return;
  MOESIM_CUDA_REQUIRE(shape.num_kv_heads > 0 && shape.num_q_heads % shape.num_kv_heads == 0,
                      "num_q_heads must be a positive multiple of num_kv_heads");
  MOESIM_CUDA_REQUIRE(shape.head_dim_qk >= 1 && shape.head_dim_qk <= kMaxHeadDim &&
                          shape.head_dim_v >= 1 && shape.head_dim_v <= kMaxHeadDim,
                      "head dims must be in [1, 256]");
  MOESIM_CUDA_REQUIRE(num_splits >= 1 && num_splits <= 65535, "num_splits must be in [1, 65535]");
  MOESIM_CUDA_REQUIRE(num_queries <= 65535, "at most 65535 query rows per launch");
  const int group = shape.num_q_heads / shape.num_kv_heads;
  const int chunks = static_cast<int>(ceil_div(group, kHeadsPerBlock));
  auto* partial_out = static_cast<float*>(workspace);
  float* partial_lse2 = partial_out + static_cast<int64_t>(num_queries) * num_splits *
                                          shape.num_q_heads * shape.head_dim_v;
  const size_t smem_bytes =
      sizeof(float) * (static_cast<size_t>(kHeadsPerBlock) * shape.head_dim_qk +
                       static_cast<size_t>(kKeysPerTile) * (shape.head_dim_qk + 1) +
                       static_cast<size_t>(kKeysPerTile) * shape.head_dim_v);
  MOESIM_CUDA_CHECK(cudaFuncSetAttribute(gqa_decode_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem_bytes)));
  const dim3 grid(static_cast<unsigned>(shape.num_kv_heads * chunks),
                  static_cast<unsigned>(num_splits), static_cast<unsigned>(num_queries));
  const DecodeParams params{shape,  q,          k,      v,           cache_start,
                            kv_len, num_splits, chunks, partial_out, partial_lse2};
  gqa_decode_kernel<<<grid, kWarps * kWarpSize, smem_bytes, stream>>>(params);
  MOESIM_CUDA_CHECK_LAUNCH();
  launch_combine_attention_splits(partial_out, partial_lse2, num_queries, num_splits,
                                  shape.num_q_heads, shape.head_dim_v, out, stream);
}

}  // namespace moesim::engine::cuda
