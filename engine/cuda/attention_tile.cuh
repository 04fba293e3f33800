// The inner step shared by the prefill and GQA decode attention kernels: one warp updates the
// online-softmax state of one query against a tile of up to kKeysPerTile keys staged in shared
// memory (FP32). Lane j scores key j; the running max / sum follow FlashAttention, in the log2
// domain (the query is pre-scaled by softmax_scale * log2(e), so exp2 replaces exp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "engine/cuda/device_utils.cuh"
#include "engine/cuda/kernel_limits.h"

namespace moesim::engine::cuda {

inline constexpr int kKeysPerTile = 32;                         // one key per lane
inline constexpr int kMaxHeadDim = kMaxAttentionHeadDim;        // head_dim_qk and head_dim_v bound
inline constexpr int kValuesPerLane = kMaxHeadDim / kWarpSize;  // 8 output elements per lane
inline constexpr float kLog2e = 1.4426950408889634f;

// Online-softmax state of one query: max m and sum l of 2^(score - m), and the unnormalised
// output; lane owns output elements lane + 32 * i.
struct QueryState {
  float max_score = -INFINITY;
  float sum_exp = 0.0f;
  float acc[kValuesPerLane] = {};
};

// Folds keys [0, num_valid) of the tile into `state`. q_row: the query (head_dim_qk floats,
// scaled); k_tile: kKeysPerTile rows of k_ld floats; v_tile: kKeysPerTile rows of head_dim_v
// floats. num_valid must be the same on every lane (1..32).
__device__ __forceinline__ void attend_tile(const float* q_row, const float* k_tile, int k_ld,
                                            const float* v_tile, int head_dim_qk, int head_dim_v,
                                            int num_valid, QueryState& state) {
  const int lane = threadIdx.x % kWarpSize;
  float score = -INFINITY;
  if (lane < num_valid) {
    const float* k_row = k_tile + lane * k_ld;
    float dot = 0.0f;
    for (int d = 0; d < head_dim_qk; ++d) dot += q_row[d] * k_row[d];
    score = dot;
  }
  const float tile_max = warp_max(score);
  const float new_max = fmaxf(state.max_score, tile_max);
  const float p = lane < num_valid ? exp2f(score - new_max) : 0.0f;
  const float correction = exp2f(state.max_score - new_max);  // 0 on the first tile
  state.sum_exp = state.sum_exp * correction + warp_sum(p);
  state.max_score = new_max;
#pragma unroll
  for (int i = 0; i < kValuesPerLane; ++i) state.acc[i] *= correction;
  for (int j = 0; j < num_valid; ++j) {
    const float pj = __shfl_sync(0xffffffffu, p, j);
    const float* v_row = v_tile + j * head_dim_v;
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) {
      const int d = lane + i * kWarpSize;
      if (d < head_dim_v) state.acc[i] += pj * v_row[d];
    }
  }
}

// Stages rows [row_begin, row_begin + num_rows) of a [rows, width] BF16 matrix (row r at
// src + r * src_row_stride) into dst (kKeysPerTile rows of dst_ld floats), zero-filling the
// rows past num_rows. Called by the whole block.
__device__ __forceinline__ void stage_rows(const __nv_bfloat16* src, int64_t src_row_stride,
                                           int num_rows, int width, float* dst, int dst_ld) {
  for (int idx = threadIdx.x; idx < kKeysPerTile * width; idx += blockDim.x) {
    const int r = idx / width;
    const int c = idx % width;
    dst[r * dst_ld + c] = r < num_rows ? __bfloat162float(src[r * src_row_stride + c]) : 0.0f;
  }
}

}  // namespace moesim::engine::cuda
