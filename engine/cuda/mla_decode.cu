// MLA decode in the absorbed form (DeepSeek-V2/V3, Kimi-K2), split-K over the context.
//
// The latent cache row [c_t, r_t] (kv_lora_rank + rope elements) is shared by every head, so a
// block takes 16 heads of one query row and reads each cache tile once for all of them; blocks
// of the same (row, split) differ only in blockIdx.x, run together and share the tile through L2.
// Per 32-token tile: S[16, 32] = Q[16, D] K^T (WMMA BF16 -> FP32), an online softmax in FP32
// (log2 domain), then O[16, R] += P[16, 32] K[32, 0:R] (WMMA). O lives in shared memory in FP32
// so rows can be rescaled when the running max moves. Arithmetic intensity is about 2 x heads
// FLOP per cache byte: with up to ~64 heads per rank the tensor cores keep up with HBM and the
// kernel is bandwidth-bound at long context; with 128 heads it sits near the H200 balance point.
// The absorption (q_nope W_UK^T) and un-absorption (o_lat W_UV) are strided-batched cuBLAS GEMMs
// over heads; the splits are merged by launch_combine_attention_splits.
#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>

#include "engine/cuda/check.h"
#include "engine/cuda/device_utils.cuh"
#include "engine/cuda/kernel_limits.h"
#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kHeads = kMlaHeadsPerBlock;  // WMMA M
constexpr int kTokens = 32;                // tokens per tile (two WMMA N tiles)
constexpr int kFrag = 16;
constexpr int kMaxLoraRank = kMaxMlaLoraRank;
constexpr int kMaxRopeDim = kMaxMlaRopeDim;
constexpr float kLog2e = 1.4426950408889634f;

// Shared-memory layout; strides padded against bank conflicts, every section 128-byte aligned
// (WMMA needs 32-byte aligned tile pointers).
struct SmemLayout {
  int qk_ld, s_ld, p_ld, o_ld;
  size_t q_offset, k_offset, s_offset, p_offset, o_offset, stats_offset, total_bytes;

  __host__ __device__ SmemLayout(int lora_rank, int rope_dim) {
    const int d = lora_rank + rope_dim;
    qk_ld = d + 8;
    s_ld = kTokens + 4;
    p_ld = kTokens + 8;
    o_ld = lora_rank + 4;
    auto align = [](size_t x) { return (x + 127) / 128 * 128; };
    q_offset = 0;
    k_offset = align(q_offset + sizeof(bf16) * kHeads * qk_ld);
    s_offset = align(k_offset + sizeof(bf16) * kTokens * qk_ld);
    p_offset = align(s_offset + sizeof(float) * kHeads * s_ld);
    o_offset = align(p_offset + sizeof(bf16) * kHeads * p_ld);
    stats_offset = align(o_offset + sizeof(float) * kHeads * o_ld);
    total_bytes = align(stats_offset + sizeof(float) * 3 * kHeads);
  }
};

struct MlaParams {
  const bf16* q_lat;  // [num_queries, num_heads, lora]
  const bf16* q;      // [num_queries, num_heads * (nope + rope)]; rope part read here
  const bf16* cache;  // [rows, lora + rope]
  const int32_t* cache_start;
  const int32_t* kv_len;
  int num_heads, lora, rope, nope;
  int num_splits;
  float scale_log2;
  float* partial_out;   // [num_queries, num_splits, num_heads, lora]
  float* partial_lse2;  // [num_queries, num_splits, num_heads]
};

// The shared-memory tiles of one block (SmemLayout's offsets into `smem`).
struct MlaTiles {
  SmemLayout layout;
  bf16* q_s;
  bf16* k_s;
  float* s_s;
  bf16* p_s;
  float* o_s;
  float* row_max;
  float* row_sum;
  float* row_rescale;

  __device__ MlaTiles(unsigned char* smem, int lora, int rope) : layout(lora, rope) {
    q_s = reinterpret_cast<bf16*>(smem + layout.q_offset);
    k_s = reinterpret_cast<bf16*>(smem + layout.k_offset);
    s_s = reinterpret_cast<float*>(smem + layout.s_offset);
    p_s = reinterpret_cast<bf16*>(smem + layout.p_offset);
    o_s = reinterpret_cast<float*>(smem + layout.o_offset);
    row_max = reinterpret_cast<float*>(smem + layout.stats_offset);
    row_sum = row_max + kHeads;
    row_rescale = row_sum + kHeads;
  }
};

// The Q tile [q_lat | q_rope] per head (rows past the last head zero), O zeroed, the softmax
// statistics initialised.
__device__ __forceinline__ void mla_load_queries(const MlaParams& p, const MlaTiles& t, int row,
                                                 int head0, int num_heads_here) {
  const int lora = p.lora;
  const int d = lora + p.rope;
  const int64_t q_row_stride = static_cast<int64_t>(p.num_heads) * (p.nope + p.rope);
  for (int idx = threadIdx.x; idx < kHeads * d; idx += blockDim.x) {
    const int h = idx / d;
    const int c = idx % d;
    bf16 value = __float2bfloat16(0.0f);
    if (h < num_heads_here) {
      const int64_t head = head0 + h;
      value = c < lora ? p.q_lat[(row * static_cast<int64_t>(p.num_heads) + head) * lora + c]
                       : p.q[row * q_row_stride + head * (p.nope + p.rope) + p.nope + (c - lora)];
    }
    t.q_s[h * t.layout.qk_ld + c] = value;
  }
  for (int idx = threadIdx.x; idx < kHeads * lora; idx += blockDim.x) {
    t.o_s[(idx / lora) * t.layout.o_ld + idx % lora] = 0.0f;
  }
  if (threadIdx.x < kHeads) {
    t.row_max[threadIdx.x] = -INFINITY;
    t.row_sum[threadIdx.x] = 0.0f;
  }
}

// The cache tile of keys [key0, key0 + rows) in 16-byte vectors; rows past `rows` zero.
__device__ __forceinline__ void mla_load_keys(const MlaTiles& t, const bf16* cache_base, int key0,
                                              int rows, int d) {
  const int vectors_per_row = d / 8;  // 16-byte vectors of 8 BF16
  for (int idx = threadIdx.x; idx < kTokens * vectors_per_row; idx += blockDim.x) {
    const int r = idx / vectors_per_row;
    const int v = idx % vectors_per_row;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < rows) {
      value = reinterpret_cast<const uint4*>(cache_base + static_cast<int64_t>(key0 + r) * d)[v];
    }
    *reinterpret_cast<uint4*>(t.k_s + r * t.layout.qk_ld + v * 8) = value;
  }
}

// Scores S = Q K^T: warp w < 2 computes tokens [16 w, 16 w + 16).
__device__ __forceinline__ void mla_scores(const MlaTiles& t, int warp, int d) {
  if (warp >= kTokens / kFrag) return;
  wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int kk = 0; kk < d / kFrag; ++kk) {
    wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, bf16, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, bf16, wmma::col_major> b;
    wmma::load_matrix_sync(a, t.q_s + kk * kFrag, t.layout.qk_ld);
    wmma::load_matrix_sync(b, t.k_s + warp * kFrag * t.layout.qk_ld + kk * kFrag, t.layout.qk_ld);
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::store_matrix_sync(t.s_s + warp * kFrag, acc, t.layout.s_ld, wmma::mem_row_major);
}

// Online softmax of the tile's scores (log2 domain): half-warp per head row, two tokens per lane;
// P in BF16, and each row's running max, sum and the rescale of its O.
__device__ __forceinline__ void mla_online_softmax(const MlaParams& p, const MlaTiles& t, int warp,
                                                   int lane, int rows) {
  const int r = warp * 2 + lane / 16;
  const int c = lane % 16;
  const float s0 = c < rows ? t.s_s[r * t.layout.s_ld + c] * p.scale_log2 : -INFINITY;
  const float s1 = c + 16 < rows ? t.s_s[r * t.layout.s_ld + c + 16] * p.scale_log2 : -INFINITY;
  float tile_max = fmaxf(s0, s1);
  for (int offset = 8; offset > 0; offset /= 2) {
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
  }
  const float old_max = t.row_max[r];
  const float new_max = fmaxf(old_max, tile_max);
  const float p0 = exp2f(s0 - new_max);
  const float p1 = exp2f(s1 - new_max);
  float tile_sum = p0 + p1;
  for (int offset = 8; offset > 0; offset /= 2) {
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, offset);
  }
  t.p_s[r * t.layout.p_ld + c] = __float2bfloat16(p0);
  t.p_s[r * t.layout.p_ld + c + 16] = __float2bfloat16(p1);
  __syncwarp();
  if (c == 0) {
    const float rescale = exp2f(old_max - new_max);
    t.row_sum[r] = t.row_sum[r] * rescale + tile_sum;
    t.row_max[r] = new_max;
    t.row_rescale[r] = rescale;
  }
}

// O[16, lora] += P[16, 32] K[32, 0:lora]; warp w owns column tiles w, w + 8, ...
__device__ __forceinline__ void mla_accumulate(const MlaTiles& t, int warp, int lora) {
  for (int n = warp; n < lora / kFrag; n += kWarps) {
    wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc;
    wmma::load_matrix_sync(acc, t.o_s + n * kFrag, t.layout.o_ld, wmma::mem_row_major);
#pragma unroll
    for (int kk = 0; kk < kTokens / kFrag; ++kk) {
      wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, bf16, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, bf16, wmma::row_major> b;
      wmma::load_matrix_sync(a, t.p_s + kk * kFrag, t.layout.p_ld);
      wmma::load_matrix_sync(b, t.k_s + kk * kFrag * t.layout.qk_ld + n * kFrag, t.layout.qk_ld);
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(t.o_s + n * kFrag, acc, t.layout.o_ld, wmma::mem_row_major);
  }
}

__global__ void __launch_bounds__(kThreads) mla_decode_kernel(MlaParams p) {
  const int head0 = blockIdx.x * kHeads;
  const int split = blockIdx.y;
  const int row = blockIdx.z;
  const int num_heads_here = min(kHeads, p.num_heads - head0);
  const int lora = p.lora;
  const int d = lora + p.rope;
  extern __shared__ __align__(128) unsigned char smem[];
  const MlaTiles t(smem, lora, p.rope);

  const int kv_len = p.kv_len[row];
  const int split_len = static_cast<int>(ceil_div(kv_len, p.num_splits));
  const int key_begin = min(kv_len, split * split_len);
  const int key_end = min(kv_len, key_begin + split_len);
  mla_load_queries(p, t, row, head0, num_heads_here);

  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const bf16* cache_base = p.cache + static_cast<int64_t>(p.cache_start[row]) * d;
  for (int key0 = key_begin; key0 < key_end; key0 += kTokens) {
    const int rows = min(kTokens, key_end - key0);
    __syncthreads();  // previous tile consumed; initialisation visible
    mla_load_keys(t, cache_base, key0, rows, d);
    __syncthreads();
    mla_scores(t, warp, d);
    __syncthreads();
    mla_online_softmax(p, t, warp, lane, rows);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kHeads * lora; idx += blockDim.x) {
      const int r = idx / lora;
      t.o_s[r * t.layout.o_ld + idx % lora] *= t.row_rescale[r];
    }
    __syncthreads();
    mla_accumulate(t, warp, lora);
  }
  __syncthreads();

  const bool empty = key_begin >= key_end;
  const int64_t first_out =
      (static_cast<int64_t>(row) * p.num_splits + split) * p.num_heads + head0;
  for (int idx = threadIdx.x; idx < num_heads_here * lora; idx += blockDim.x) {
    const int h = idx / lora;
    const int c = idx % lora;
    p.partial_out[(first_out + h) * lora + c] =
        empty ? 0.0f : t.o_s[h * t.layout.o_ld + c] / t.row_sum[h];
  }
  if (threadIdx.x < num_heads_here) {
    p.partial_lse2[first_out + threadIdx.x] =
        empty ? -INFINITY : t.row_max[threadIdx.x] + log2f(t.row_sum[threadIdx.x]);
  }
}

struct Workspace {
  bf16* q_lat;
  bf16* o_lat;
  float* partial_out;
  float* partial_lse2;
  int64_t total_bytes;
};

Workspace carve_workspace(const MlaDecodeShape& shape, int num_queries, int num_splits,
                          void* base) {
  auto align = [](int64_t x) { return (x + 255) / 256 * 256; };
  const int64_t lat = static_cast<int64_t>(num_queries) * shape.num_heads * shape.kv_lora_rank;
  const int64_t partial_rows = static_cast<int64_t>(num_queries) * num_splits * shape.num_heads;
  const int64_t q_lat_off = 0;
  const int64_t o_lat_off = align(q_lat_off + lat * 2);
  const int64_t partial_off = align(o_lat_off + lat * 2);
  const int64_t lse_off = align(partial_off + partial_rows * shape.kv_lora_rank * 4);
  const int64_t total = align(lse_off + partial_rows * 4);
  auto* bytes = static_cast<unsigned char*>(base);
  return Workspace{reinterpret_cast<bf16*>(bytes + q_lat_off),
                   reinterpret_cast<bf16*>(bytes + o_lat_off),
                   reinterpret_cast<float*>(bytes + partial_off),
                   reinterpret_cast<float*>(bytes + lse_off), total};
}

}  // namespace

int64_t mla_decode_workspace_bytes(const MlaDecodeShape& shape, int num_queries, int num_splits) {
  return carve_workspace(shape, num_queries, num_splits, nullptr).total_bytes;
}

void launch_mla_decode(cublasHandle_t handle, const MlaDecodeShape& shape, const bf16* q,
                       const bf16* latent_cache, const int32_t* cache_start, const int32_t* kv_len,
                       const bf16* w_kv_b, int num_queries, int num_splits, void* workspace,
                       bf16* out, cudaStream_t stream) {
  if (num_queries == 0) return;
  MOESIM_CUDA_REQUIRE(shape.kv_lora_rank % 16 == 0 && shape.kv_lora_rank >= 16 &&
                          shape.kv_lora_rank <= kMaxLoraRank,
                      "kv_lora_rank must be a multiple of 16 in [16, 512]");
  MOESIM_CUDA_REQUIRE(shape.qk_rope_head_dim % 16 == 0 && shape.qk_rope_head_dim <= kMaxRopeDim,
                      "qk_rope_head_dim must be a multiple of 16, at most 128");
  MOESIM_CUDA_REQUIRE(shape.num_heads >= 1 && shape.qk_nope_head_dim >= 1 && shape.v_head_dim >= 1,
                      "heads and head dims must be positive");
  MOESIM_CUDA_REQUIRE(num_queries <= 65535 && num_splits >= 1 && num_splits <= 65535,
                      "at most 65535 query rows and splits");
  const Workspace ws = carve_workspace(shape, num_queries, num_splits, workspace);
  const int heads = shape.num_heads;
  const int lora = shape.kv_lora_rank;
  const int nope = shape.qk_nope_head_dim;
  const int rope = shape.qk_rope_head_dim;
  const int vdim = shape.v_head_dim;
  const int kv_b_cols = heads * (nope + vdim);
  const float alpha = 1.0f;
  const float beta = 0.0f;
  MOESIM_CUBLAS_CHECK(cublasSetStream(handle, stream));

  // q_lat[i, h] = q_nope[i, h] W_UK[h]^T. Column-major per head h: C (lora x n) = op(A) B with
  // A = the head's W_UK block viewed as nope x lora (ld kv_b_cols), transposed.
  MOESIM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, lora, num_queries, nope, &alpha, w_kv_b, CUDA_R_16BF,
      kv_b_cols, nope + vdim, q, CUDA_R_16BF, heads * (nope + rope), nope + rope, &beta, ws.q_lat,
      CUDA_R_16BF, heads * lora, lora, heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));

  const SmemLayout layout(lora, rope);
  MOESIM_CUDA_CHECK(cudaFuncSetAttribute(mla_decode_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(layout.total_bytes)));
  const MlaParams params{ws.q_lat,
                         q,
                         latent_cache,
                         cache_start,
                         kv_len,
                         heads,
                         lora,
                         rope,
                         nope,
                         num_splits,
                         shape.softmax_scale * kLog2e,
                         ws.partial_out,
                         ws.partial_lse2};
  const dim3 grid(static_cast<unsigned>(ceil_div(heads, kHeads)), static_cast<unsigned>(num_splits),
                  static_cast<unsigned>(num_queries));
  mla_decode_kernel<<<grid, kThreads, layout.total_bytes, stream>>>(params);
  MOESIM_CUDA_CHECK_LAUNCH();
  launch_combine_attention_splits(ws.partial_out, ws.partial_lse2, num_queries, num_splits, heads,
                                  lora, ws.o_lat, stream);

  // out[i, h] = o_lat[i, h] W_UV[h]: C (v x n) = A B, A = the head's W_UV block (v x lora,
  // ld kv_b_cols), B = o_lat viewed as lora x n (ld heads * lora).
  MOESIM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, CUBLAS_OP_N, CUBLAS_OP_N, vdim, num_queries, lora, &alpha, w_kv_b + nope, CUDA_R_16BF,
      kv_b_cols, nope + vdim, ws.o_lat, CUDA_R_16BF, heads * lora, lora, &beta, out, CUDA_R_16BF,
      heads * vdim, vdim, heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace moesim::engine::cuda
