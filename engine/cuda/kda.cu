// KDA (Kimi Delta Attention): the gated delta rule with per-channel decay,
//   S_t = (I - beta_t k_t k_t^T) Diag(alpha_t) S_{t-1} + beta_t k_t v_t^T,   o_t = S_t^T q_t.
//
// Chunked form for prefill (one block per sequence and head, chunks in order, the state in
// shared memory): the recurrence unrolled within a chunk, solved with the UT transform (the WY
// representation); every exponent is a difference of cumulative log-decays and <= 0, so nothing
// overflows. Recurrent form for decode: one block per sequence and head, one thread per value
// column. docs/cuda.md ("Kernel notes") has the derivation.
#include <cuda_bf16.h>

#include "engine/cuda/check.h"
#include "engine/cuda/device_utils.cuh"
#include "engine/cuda/kernel_limits.h"
#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {
namespace {

constexpr int kChunkThreads = 256;
constexpr int kDecodeThreads = 128;
constexpr int kMaxHeadDim = kMaxKdaHeadDim;
constexpr int kC = kKdaChunkTokens;

struct KdaChunkSmem {
  int qk_ld, c_ld;
  size_t s, q, k, g, v, u, a, t, qk, beta, g_last, total_floats;

  __host__ __device__ KdaChunkSmem(int dk, int dv) {
    qk_ld = dk + 1;  // (r, s) pair loops read rows r and s: odd stride avoids bank conflicts
    c_ld = kC + 1;
    s = 0;                  // S [dk, dv]
    q = s + dk * dv;        // Q, then e^G * Q          [C, qk_ld]
    k = q + kC * qk_ld;     // K, then e^{G_last - G} * K [C, qk_ld]
    g = k + kC * qk_ld;     // G (cumulative log decay), then e^G * K [C, qk_ld]
    v = g + kC * qk_ld;     // V, then B                 [C, dv]
    u = v + kC * dv;        // U                         [C, dv]
    a = u + kC * dv;        // A                         [C, c_ld]
    t = a + kC * c_ld;      // T = (I + A)^-1            [C, c_ld]
    qk = t + kC * c_ld;     // decayed q . k             [C, c_ld]
    beta = qk + kC * c_ld;  // [C]
    g_last = beta + kC;     // G of the chunk's last token [dk]
    total_floats = g_last + dk;
  }
};

struct KdaParams {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  const float* log_alpha;
  const float* beta;
  const int32_t* seq_start;
  const int32_t* seq_len;
  float* state;
  bf16* out;
  int num_heads, dk, dv;
};

__global__ void __launch_bounds__(kChunkThreads) kda_chunked_kernel(KdaParams p) {
  const int seq = blockIdx.y;
  const int head = blockIdx.x;
  const int dk = p.dk;
  const int dv = p.dv;
  const KdaChunkSmem L(dk, dv);
  extern __shared__ float smem[];
  float* S = smem + L.s;
  float* Q = smem + L.q;
  float* K = smem + L.k;
  float* G = smem + L.g;
  float* V = smem + L.v;
  float* U = smem + L.u;
  float* A = smem + L.a;
  float* T = smem + L.t;
  float* QK = smem + L.qk;
  float* beta = smem + L.beta;
  float* g_last = smem + L.g_last;

  float* state = p.state + (static_cast<int64_t>(seq) * p.num_heads + head) * dk * dv;
  for (int idx = threadIdx.x; idx < dk * dv; idx += blockDim.x) S[idx] = state[idx];

  const int64_t first = p.seq_start[seq];
  const int len = p.seq_len[seq];
  for (int t0 = 0; t0 < len; t0 += kC) {
    const int n = min(kC, len - t0);
    __syncthreads();  // previous chunk done with every buffer
    for (int idx = threadIdx.x; idx < n * dk; idx += blockDim.x) {
      const int r = idx / dk;
      const int i = idx % dk;
      const int64_t src = ((first + t0 + r) * p.num_heads + head) * dk + i;
      Q[r * L.qk_ld + i] = __bfloat162float(p.q[src]);
      K[r * L.qk_ld + i] = __bfloat162float(p.k[src]);
      G[r * L.qk_ld + i] = p.log_alpha[src];
    }
    for (int idx = threadIdx.x; idx < n * dv; idx += blockDim.x) {
      const int r = idx / dv;
      V[idx] = __bfloat162float(p.v[((first + t0 + r) * p.num_heads + head) * dv + idx % dv]);
    }
    if (threadIdx.x < n)
      beta[threadIdx.x] = p.beta[(first + t0 + threadIdx.x) * p.num_heads + head];
    __syncthreads();

    // Cumulative log decay per channel.
    for (int i = threadIdx.x; i < dk; i += blockDim.x) {
      for (int r = 1; r < n; ++r) G[r * L.qk_ld + i] += G[(r - 1) * L.qk_ld + i];
      g_last[i] = G[(n - 1) * L.qk_ld + i];
    }
    __syncthreads();

    // Pairwise decayed products: A (strictly lower, scaled by beta_r) and QK (lower, diagonal
    // included).
    for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
      const int r = idx / n;
      const int s = idx % n;
      float kk = 0.0f;
      float qk = 0.0f;
      if (s <= r) {
        for (int i = 0; i < dk; ++i) {
          const float decay = expf(G[r * L.qk_ld + i] - G[s * L.qk_ld + i]);
          const float ks = K[s * L.qk_ld + i] * decay;
          kk += K[r * L.qk_ld + i] * ks;
          qk += Q[r * L.qk_ld + i] * ks;
        }
      }
      A[r * L.c_ld + s] = s < r ? beta[r] * kk : 0.0f;
      QK[r * L.c_ld + s] = qk;
    }
    __syncthreads();

    // Decayed copies: Q <- e^G q, G <- e^G k (K~), K <- e^{G_last - G} k.
    for (int idx = threadIdx.x; idx < n * dk; idx += blockDim.x) {
      const int r = idx / dk;
      const int i = idx % dk;
      const int at = r * L.qk_ld + i;
      const float g = G[at];
      const float k = K[at];
      Q[at] *= expf(g);
      G[at] = k * expf(g);
      K[at] = k * expf(g_last[i] - g);
    }
    __syncthreads();

    // B = Diag(beta) (V - K~ S), in place over V.
    for (int idx = threadIdx.x; idx < n * dv; idx += blockDim.x) {
      const int r = idx / dv;
      const int j = idx % dv;
      float acc = 0.0f;
      for (int i = 0; i < dk; ++i) acc += G[r * L.qk_ld + i] * S[i * dv + j];
      V[idx] = beta[r] * (V[idx] - acc);
    }
    // UT transform: T = (I + A)^{-1} by forward substitution, one row per step.
    for (int r = 0; r < n; ++r) {
      if (threadIdx.x < n) {
        const int c = threadIdx.x;
        float value = r == c ? 1.0f : 0.0f;
        for (int s = c; s < r; ++s) value -= A[r * L.c_ld + s] * T[s * L.c_ld + c];
        T[r * L.c_ld + c] = c <= r ? value : 0.0f;
      }
      __syncthreads();
    }

    // U = T B.
    for (int idx = threadIdx.x; idx < n * dv; idx += blockDim.x) {
      const int r = idx / dv;
      const int j = idx % dv;
      float acc = 0.0f;
      for (int s = 0; s <= r; ++s) acc += T[r * L.c_ld + s] * V[s * dv + j];
      U[idx] = acc;
    }
    __syncthreads();

    // Outputs (state before the chunk plus the intra-chunk part).
    for (int idx = threadIdx.x; idx < n * dv; idx += blockDim.x) {
      const int r = idx / dv;
      const int j = idx % dv;
      float acc = 0.0f;
      for (int i = 0; i < dk; ++i) acc += Q[r * L.qk_ld + i] * S[i * dv + j];
      for (int s = 0; s <= r; ++s) acc += QK[r * L.c_ld + s] * U[s * dv + j];
      p.out[((first + t0 + r) * p.num_heads + head) * dv + j] = __float2bfloat16(acc);
    }
    __syncthreads();

    // Carry the state to the chunk's end.
    for (int idx = threadIdx.x; idx < dk * dv; idx += blockDim.x) {
      const int i = idx / dv;
      const int j = idx % dv;
      float acc = expf(g_last[i]) * S[idx];
      for (int s = 0; s < n; ++s) acc += K[s * L.qk_ld + i] * U[s * dv + j];
      S[idx] = acc;
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < dk * dv; idx += blockDim.x) state[idx] = S[idx];
}

__global__ void __launch_bounds__(kDecodeThreads) kda_decode_kernel(KdaParams p) {
  const int seq = blockIdx.y;
  const int head = blockIdx.x;
  const int dk = p.dk;
  const int dv = p.dv;
  __shared__ float q_s[kMaxHeadDim];
  __shared__ float k_s[kMaxHeadDim];
  __shared__ float alpha_s[kMaxHeadDim];
  const int64_t qk_base = (static_cast<int64_t>(seq) * p.num_heads + head) * dk;
  for (int i = threadIdx.x; i < dk; i += blockDim.x) {
    q_s[i] = __bfloat162float(p.q[qk_base + i]);
    k_s[i] = __bfloat162float(p.k[qk_base + i]);
    alpha_s[i] = expf(p.log_alpha[qk_base + i]);
  }
  __syncthreads();
  const float beta = p.beta[static_cast<int64_t>(seq) * p.num_heads + head];
  float* state = p.state + (static_cast<int64_t>(seq) * p.num_heads + head) * dk * dv;
  const int64_t v_base = (static_cast<int64_t>(seq) * p.num_heads + head) * dv;
  for (int j = threadIdx.x; j < dv; j += blockDim.x) {
    // u = (Diag(alpha) S)^T k, column j.
    float u = 0.0f;
    for (int i = 0; i < dk; ++i) u += k_s[i] * alpha_s[i] * state[i * dv + j];
    const float w = beta * (__bfloat162float(p.v[v_base + j]) - u);
    float o = 0.0f;
    for (int i = 0; i < dk; ++i) {
      const float s = alpha_s[i] * state[i * dv + j] + k_s[i] * w;
      state[i * dv + j] = s;
      o += q_s[i] * s;
    }
    p.out[v_base + j] = __float2bfloat16(o);
  }
}

void require_kda_shape(const KdaKernelShape& shape) {
  MOESIM_CUDA_REQUIRE(shape.head_dim_k >= 1 && shape.head_dim_k <= kMaxHeadDim &&
                          shape.head_dim_v >= 1 && shape.head_dim_v <= kMaxHeadDim,
                      "KDA head dims must be in [1, 128]");
  MOESIM_CUDA_REQUIRE(shape.num_heads >= 1 && shape.num_heads <= 0x7fffffff,
                      "num_heads must be positive");
  MOESIM_CUDA_REQUIRE(shape.num_seqs <= 65535, "at most 65535 sequences per launch");
}

}  // namespace

void launch_kda_chunked(const KdaKernelShape& shape, const bf16* q, const bf16* k, const bf16* v,
                        const float* log_alpha, const float* beta, const int32_t* seq_start,
                        const int32_t* seq_len, float* state, bf16* out, cudaStream_t stream) {
  if (shape.num_seqs == 0) return;
  require_kda_shape(shape);
  const KdaChunkSmem layout(shape.head_dim_k, shape.head_dim_v);
  const size_t smem_bytes = layout.total_floats * sizeof(float);
  int device = 0;
  int max_smem_bytes = 0;
  MOESIM_CUDA_CHECK(cudaGetDevice(&device));
  MOESIM_CUDA_CHECK(
      cudaDeviceGetAttribute(&max_smem_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  MOESIM_CUDA_REQUIRE(smem_bytes <= static_cast<size_t>(max_smem_bytes),
                      "KDA chunk state does not fit in shared memory on this device");
  MOESIM_CUDA_CHECK(cudaFuncSetAttribute(kda_chunked_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem_bytes)));
  const KdaParams params{q,
                         k,
                         v,
                         log_alpha,
                         beta,
                         seq_start,
                         seq_len,
                         state,
                         out,
                         shape.num_heads,
                         shape.head_dim_k,
                         shape.head_dim_v};
  const dim3 grid(static_cast<unsigned>(shape.num_heads), static_cast<unsigned>(shape.num_seqs));
  kda_chunked_kernel<<<grid, kChunkThreads, smem_bytes, stream>>>(params);
  MOESIM_CUDA_CHECK_LAUNCH();
}

void launch_kda_decode(const KdaKernelShape& shape, const bf16* q, const bf16* k, const bf16* v,
                       const float* log_alpha, const float* beta, float* state, bf16* out,
                       cudaStream_t stream) {
  if (shape.num_seqs == 0) return;
  require_kda_shape(shape);
  const KdaParams params{q,
                         k,
                         v,
                         log_alpha,
                         beta,
                         nullptr,
                         nullptr,
                         state,
                         out,
                         shape.num_heads,
                         shape.head_dim_k,
                         shape.head_dim_v};
  const dim3 grid(static_cast<unsigned>(shape.num_heads), static_cast<unsigned>(shape.num_seqs));
  kda_decode_kernel<<<grid, kDecodeThreads, 0, stream>>>(params);
  MOESIM_CUDA_CHECK_LAUNCH();
}

}  // namespace moesim::engine::cuda
