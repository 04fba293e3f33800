// Glue kernels of the attention layers and the FP8 expert path: RoPE, MLA key/value expansion,
// per-head L2 norm, KDA short convolution and gates, sigmoid gating, per-row FP8 quantisation
// and dequantisation. All element-wise or row-wise and memory-bound; written plainly.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "engine/cuda/check.h"
#include "engine/cuda/device_utils.cuh"
#include "engine/cuda/kernel_limits.h"
#include "engine/cuda/launchers.h"
#include "engine/dtype.h"
#include "engine/synthetic.h"

namespace moesim::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxTaps = kMaxShortConvTaps;
constexpr float kFp8Max = 448.0f;

unsigned grid_for(int64_t num_items) {
  return static_cast<unsigned>(std::clamp<int64_t>(ceil_div(num_items, kThreads), 1, 65536));
}

#define MOESIM_GRID_STRIDE(i, n)                                                         \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void rope_kernel(bf16* x, int64_t row_stride, int64_t num_rows, int num_heads,
                            int head_stride, int rope_offset, int rope_dim,
                            const int32_t* __restrict__ positions) {
  const int half = rope_dim / 2;
  MOESIM_GRID_STRIDE(idx, num_rows * num_heads * half) {
    const int j = static_cast<int>(idx % half);
    const int64_t rh = idx / half;
    const int h = static_cast<int>(rh % num_heads);
    const int64_t r = rh / num_heads;
    bf16* v = x + r * row_stride + static_cast<int64_t>(h) * head_stride + rope_offset;
    const double inv_freq = pow(10000.0, -2.0 * j / rope_dim);
    const double angle = static_cast<double>(positions[r]) * inv_freq;
    const float c = static_cast<float>(cos(angle));
    const float s = static_cast<float>(sin(angle));
    const float a = __bfloat162float(v[j]);
    const float b = __bfloat162float(v[j + half]);
    v[j] = __float2bfloat16(a * c - b * s);
    v[j + half] = __float2bfloat16(a * s + b * c);
  }
}

__global__ void mla_expand_kv_kernel(const bf16* __restrict__ kv_up,
                                     const bf16* __restrict__ latent_cache, bf16* __restrict__ k,
                                     bf16* __restrict__ v, int64_t num_rows, int num_heads,
                                     int nope, int rope, int v_dim, int lora) {
  const int k_dim = nope + rope;
  const int up_dim = nope + v_dim;
  MOESIM_GRID_STRIDE(idx, num_rows * num_heads * (k_dim + v_dim)) {
    const int c = static_cast<int>(idx % (k_dim + v_dim));
    const int64_t rh = idx / (k_dim + v_dim);
    const int h = static_cast<int>(rh % num_heads);
    const int64_t r = rh / num_heads;
    const bf16* up = kv_up + (r * num_heads + h) * up_dim;
    if (c < nope) {
      k[rh * k_dim + c] = up[c];
    } else if (c < k_dim) {
      k[rh * k_dim + c] = latent_cache[r * (lora + rope) + lora + (c - nope)];
    } else {
      v[rh * v_dim + (c - k_dim)] = up[nope + (c - k_dim)];
    }
  }
}

// One warp per (row, head).
__global__ void l2norm_heads_kernel(bf16* x, int64_t num_blocks, int head_dim, float epsilon,
                                    float scale) {
  const int64_t block =
      blockIdx.x * static_cast<int64_t>(blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (block >= num_blocks) return;
  const int lane = threadIdx.x % kWarpSize;
  bf16* v = x + block * head_dim;
  float sum_sq = 0.0f;
  for (int c = lane; c < head_dim; c += kWarpSize) {
    const float e = __bfloat162float(v[c]);
    sum_sq += e * e;
  }
  const float factor = scale / sqrtf(warp_sum(sum_sq) + epsilon);
  for (int c = lane; c < head_dim; c += kWarpSize) {
    v[c] = __float2bfloat16(__bfloat162float(v[c]) * factor);
  }
}

// One thread per (sequence, channel), tokens in order.
__global__ void kda_conv_silu_kernel(const bf16* __restrict__ proj, const bf16* __restrict__ conv_w,
                                     float* conv_state, int state_row_width,
                                     int state_channel_offset,
                                     const int32_t* __restrict__ token_start,
                                     const int32_t* __restrict__ num_new, int taps, int channels,
                                     bf16* __restrict__ out) {
  const int seq = blockIdx.y;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const int history = taps - 1;
  float* state =
      conv_state + static_cast<int64_t>(seq) * history * state_row_width + state_channel_offset;
  const int64_t row0 = token_start[seq];
  const int n = num_new[seq];
  float weight[kMaxTaps];
  float window[kMaxTaps];  // window[j]: input of tap j for the current token
  for (int j = 0; j < taps; ++j) weight[j] = __bfloat162float(conv_w[j * channels + c]);
  for (int j = 0; j < history; ++j) window[j] = state[j * state_row_width + c];
  for (int i = 0; i < n; ++i) {
    window[history] = __bfloat162float(proj[(row0 + i) * channels + c]);
    float acc = 0.0f;
    for (int j = 0; j < taps; ++j) acc += weight[j] * window[j];
    out[(row0 + i) * channels + c] = __float2bfloat16(acc / (1.0f + expf(-acc)));
    for (int j = 0; j < history; ++j) window[j] = window[j + 1];
  }
  for (int j = 0; j < history; ++j) state[j * state_row_width + c] = window[j];
}

__global__ void kda_gates_kernel(const bf16* __restrict__ f, const float* __restrict__ a_log,
                                 const float* __restrict__ dt_bias,
                                 const bf16* __restrict__ beta_logit, int64_t num_tokens,
                                 int num_heads, int head_dim_k, float* __restrict__ log_alpha,
                                 float* __restrict__ beta) {
  const int width = num_heads * head_dim_k;
  MOESIM_GRID_STRIDE(idx, num_tokens * width) {
    const int c = static_cast<int>(idx % width);
    const float z = __bfloat162float(f[idx]) + dt_bias[c];
    const float softplus = z > 20.0f ? z : log1pf(expf(z));
    log_alpha[idx] = -expf(a_log[c / head_dim_k]) * softplus;
    if (c < num_heads) {
      const int64_t t = idx / width;
      beta[t * num_heads + c] =
          1.0f / (1.0f + expf(-__bfloat162float(beta_logit[t * num_heads + c])));
    }
  }
}

__global__ void sigmoid_gate_kernel(bf16* x, const bf16* __restrict__ gate, int64_t n) {
  MOESIM_GRID_STRIDE(i, n) {
    const float g = __bfloat162float(gate[i]);
    x[i] = __float2bfloat16(__bfloat162float(x[i]) / (1.0f + expf(-g)));
  }
}

// One block per row.
__global__ void quantize_fp8_rows_kernel(const bf16* __restrict__ x, int cols,
                                         fp8e4m3* __restrict__ out, float* __restrict__ row_scale) {
  __shared__ float scratch[32];
  const bf16* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  float amax = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    amax = fmaxf(amax, fabsf(__bfloat162float(row[c])));
  }
  // Block max through the sum helper's layout: reduce per warp, then across warps.
  amax = warp_max(amax);
  if (threadIdx.x % kWarpSize == 0) scratch[threadIdx.x / kWarpSize] = amax;
  __syncthreads();
  if (threadIdx.x < kWarpSize) {
    float m = threadIdx.x < blockDim.x / kWarpSize ? scratch[threadIdx.x] : 0.0f;
    m = warp_max(m);
    if (threadIdx.x == 0) scratch[0] = m;
  }
  __syncthreads();
  const float scale = scratch[0] > 0.0f ? scratch[0] / kFp8Max : 1.0f;
  if (threadIdx.x == 0) row_scale[blockIdx.x] = scale;
  fp8e4m3* out_row = out + static_cast<int64_t>(blockIdx.x) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    out_row[c].__x =
        __nv_cvt_float_to_fp8(__bfloat162float(row[c]) / scale, __NV_SATFINITE, __NV_E4M3);
  }
}

__global__ void dequantize_rows_kernel(const float* __restrict__ y,
                                       const float* __restrict__ row_scale,
                                       const float* __restrict__ tensor_scale, int64_t num_rows,
                                       int cols, bf16* __restrict__ out) {
  const float t = *tensor_scale;
  MOESIM_GRID_STRIDE(i, num_rows * cols) {
    out[i] = __float2bfloat16(y[i] * row_scale[i / cols] * t);
  }
}

__global__ void transpose_bytes_kernel(const uint8_t* __restrict__ in, int64_t num_rows,
                                       int64_t num_cols, uint8_t* __restrict__ out) {
  __shared__ uint8_t tile[32][33];
  const int64_t col0 = blockIdx.x * 32;
  const int64_t row0 = blockIdx.y * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t r = row0 + i;
    const int64_t c = col0 + threadIdx.x;
    if (r < num_rows && c < num_cols) tile[i][threadIdx.x] = in[r * num_cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t c = col0 + i;
    const int64_t r = row0 + threadIdx.x;
    if (r < num_rows && c < num_cols) out[c * num_rows + r] = tile[threadIdx.x][i];
  }
}

__global__ void fill_synthetic_kernel(void* dst, int dtype_code, int64_t n, uint64_t seed,
                                      float scale) {
  MOESIM_GRID_STRIDE(i, n) {
    const float value = synthetic_value(seed, static_cast<uint64_t>(i)) * scale;
    if (dtype_code == 0) {
      static_cast<float*>(dst)[i] = value;
    } else if (dtype_code == 1) {
      static_cast<uint16_t*>(dst)[i] = float_to_bf16(value);
    } else {
      static_cast<uint8_t*>(dst)[i] = float_to_fp8e4m3(value);
    }
  }
}

}  // namespace

void launch_fill_synthetic(void* dst, int dtype_code, int64_t num_elements, uint64_t seed,
                           float scale, cudaStream_t stream) {
  if (num_elements == 0) return;
  MOESIM_CUDA_REQUIRE(dtype_code >= 0 && dtype_code <= 2, "dtype_code must be 0, 1 or 2");
  fill_synthetic_kernel<<<grid_for(num_elements), kThreads, 0, stream>>>(dst, dtype_code,
                                                                         num_elements, seed, scale);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_transpose_bytes(const uint8_t* in, int64_t num_rows, int64_t num_cols, uint8_t* out,
                            cudaStream_t stream) {
  if (num_rows == 0 || num_cols == 0) return;
  MOESIM_CUDA_REQUIRE(ceil_div(num_rows, 32) <= 65535 && ceil_div(num_cols, 32) <= 0x7fffffff,
                      "matrix too large to transpose in one launch");
  const dim3 grid(static_cast<unsigned>(ceil_div(num_cols, 32)),
                  static_cast<unsigned>(ceil_div(num_rows, 32)));
  transpose_bytes_kernel<<<grid, dim3(32, 8), 0, stream>>>(in, num_rows, num_cols, out);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_rope(bf16* x, int64_t row_stride, int64_t num_rows, int num_heads, int head_stride,
                 int rope_offset, int rope_dim, const int32_t* positions, cudaStream_t stream) {
  if (num_rows == 0 || num_heads == 0 || rope_dim == 0) return;
  MOESIM_CUDA_REQUIRE(rope_dim % 2 == 0, "rope_dim must be even");
  rope_kernel<<<grid_for(num_rows * num_heads * (rope_dim / 2)), kThreads, 0, stream>>>(
      x, row_stride, num_rows, num_heads, head_stride, rope_offset, rope_dim, positions);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_mla_expand_kv(const bf16* kv_up, const bf16* latent_cache, bf16* k, bf16* v,
                          int64_t num_rows, int num_heads, int nope, int rope, int v_dim, int lora,
                          cudaStream_t stream) {
  if (num_rows == 0) return;
  mla_expand_kv_kernel<<<grid_for(num_rows * num_heads * (nope + rope + v_dim)), kThreads, 0,
                         stream>>>(kv_up, latent_cache, k, v, num_rows, num_heads, nope, rope,
                                   v_dim, lora);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_l2norm_heads(bf16* x, int64_t num_rows, int num_heads, int head_dim, float epsilon,
                         float scale, cudaStream_t stream) {
  const int64_t num_blocks = num_rows * num_heads;
  if (num_blocks == 0) return;
  constexpr int kWarpsPerBlock = kThreads / kWarpSize;
  const int64_t grid = ceil_div(num_blocks, kWarpsPerBlock);
  MOESIM_CUDA_REQUIRE(grid <= 0x7fffffff, "too many heads for one grid");
  l2norm_heads_kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(x, num_blocks, head_dim,
                                                                            epsilon, scale);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_kda_conv_silu(const bf16* proj, const bf16* conv_w, float* conv_state,
                          int state_row_width, int state_channel_offset, const int32_t* token_start,
                          const int32_t* num_new, int num_seqs, int taps, int channels, bf16* out,
                          cudaStream_t stream) {
  if (num_seqs == 0) return;
  MOESIM_CUDA_REQUIRE(taps >= 1 && taps <= kMaxTaps, "short_conv_kernel must be in [1, 16]");
  MOESIM_CUDA_REQUIRE(num_seqs <= 65535, "at most 65535 sequences per launch");
  const dim3 grid(static_cast<unsigned>(ceil_div(channels, kThreads)),
                  static_cast<unsigned>(num_seqs));
  kda_conv_silu_kernel<<<grid, kThreads, 0, stream>>>(proj, conv_w, conv_state, state_row_width,
                                                      state_channel_offset, token_start, num_new,
                                                      taps, channels, out);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_kda_gates(const bf16* f, const float* a_log, const float* dt_bias,
                      const bf16* beta_logit, int64_t num_tokens, int num_heads, int head_dim_k,
                      float* log_alpha, float* beta, cudaStream_t stream) {
  if (num_tokens == 0) return;
  MOESIM_CUDA_REQUIRE(head_dim_k >= 1, "head_dim_k must be positive");
  kda_gates_kernel<<<grid_for(num_tokens * num_heads * head_dim_k), kThreads, 0, stream>>>(
      f, a_log, dt_bias, beta_logit, num_tokens, num_heads, head_dim_k, log_alpha, beta);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_sigmoid_gate(bf16* x, const bf16* gate, int64_t num_elements, cudaStream_t stream) {
  if (num_elements == 0) return;
  sigmoid_gate_kernel<<<grid_for(num_elements), kThreads, 0, stream>>>(x, gate, num_elements);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_quantize_fp8_rows(const bf16* x, int64_t num_rows, int cols, fp8e4m3* out,
                              float* row_scale, cudaStream_t stream) {
  if (num_rows == 0) return;
  MOESIM_CUDA_REQUIRE(num_rows <= 0x7fffffff && cols >= 1, "bad row count or width");
  quantize_fp8_rows_kernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(x, cols, out,
                                                                                     row_scale);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_dequantize_rows(const float* y, const float* row_scale, const float* tensor_scale,
                            int64_t num_rows, int cols, bf16* out, cudaStream_t stream) {
  if (num_rows == 0) return;
  dequantize_rows_kernel<<<grid_for(num_rows * cols), kThreads, 0, stream>>>(
      y, row_scale, tensor_scale, num_rows, cols, out);
  MOESIM_CUDA_CHECK_LAUNCH();
}

}  // namespace moesim::engine::cuda
