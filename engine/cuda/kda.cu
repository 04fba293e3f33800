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

// The shared-memory buffers of one chunked block (KdaChunkSmem's offsets into `smem`).
struct KdaChunkView {
  KdaChunkSmem L;
  int dk, dv;
  float *S, *Q, *K, *G, *V, *U, *A, *T, *QK, *beta, *g_last;

  __device__ KdaChunkView(float* smem, int dk_, int dv_) : L(dk_, dv_), dk(dk_), dv(dv_) {
    S = smem + L.s;
    Q = smem + L.q;
    K = smem + L.k;
    G = smem + L.g;
    V = smem + L.v;
    U = smem + L.u;
    A = smem + L.a;
    T = smem + L.t;
    QK = smem + L.qk;
    beta = smem + L.beta;
    g_last = smem + L.g_last;
  }
};

// Loads the chunk's n tokens from token `first + t0` on: Q, K, log decays G, V and beta.
__device__ __forceinline__ void kda_load_chunk(const KdaParams& p, const KdaChunkView& c,
                                               int64_t first, int t0, int n, int head) {
  const int dk = c.dk;
  const int dv = c.dv;
  const int ld = c.L.qk_ld;
  for (int idx = threadIdx.x; idx < n * dk; idx += blockDim.x) {
    const int r = idx / dk;
    const int i = idx % dk;
    const int64_t src = ((first + t0 + r) * p.num_heads + head) * dk + i;
    c.Q[r * ld + i] = __bfloat162float(p.q[src]);
    c.K[r * ld + i] = __bfloat162float(p.k[src]);
    c.G[r * ld + i] = p.log_alpha[src];
  }
  for (int idx = threadIdx.x; idx < n * dv; idx += blockDim.x) {
    const int r = idx / dv;
    c.V[idx] = __bfloat162float(p.v[((first + t0 + r) * p.num_heads + head) * dv + idx % dv]);
  }
  if (threadIdx.x < n)
    c.beta[threadIdx.x] = p.beta[(first + t0 + threadIdx.x) * p.num_heads + head];
}

// Cumulative log decays, the pairwise decayed products A (strictly lower, scaled by beta_r) and
// QK (lower, diagonal included), then the decayed copies Q <- e^G q, G <- e^G k (K~),
// K <- e^{G_last - G} k.
__device__ __forceinline__ void kda_decay_chunk(const KdaChunkView& c, int n) {
  const int dk = c.dk;
  const int ld = c.L.qk_ld;
  const int c_ld = c.L.c_ld;
  for (int i = threadIdx.x; i < dk; i += blockDim.x) {
    for (int r = 1; r < n; ++r) c.G[r * ld + i] += c.G[(r - 1) * ld + i];
    c.g_last[i] = c.G[(n - 1) * ld + i];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
    const int r = idx / n;
    const int s = idx % n;
    float kk = 0.0f;
    float qk = 0.0f;
    if (s <= r) {
      for (int i = 0; i < dk; ++i) {
        const float decay = expf(c.G[r * ld + i] - c.G[s * ld + i]);
        const float ks = c.K[s * ld + i] * decay;
        kk += c.K[r * ld + i] * ks;
        qk += c.Q[r * ld + i] * ks;
      }
    }
    c.A[r * c_ld + s] = s < r ? c.beta[r] * kk : 0.0f;
    c.QK[r * c_ld + s] = qk;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < n * dk; idx += blockDim.x) {
    const int r = idx / dk;
    const int i = idx % dk;
    const int at = r * ld + i;
    const float g = c.G[at];
    const float k = c.K[at];
    c.Q[at] *= expf(g);
    c.G[at] = k * expf(g);
    c.K[at] = k * expf(c.g_last[i] - g);
  }
}

// U = T B with B = Diag(beta) (V - K~ S) (in place over V) and the UT transform T = (I + A)^{-1}
// by forward substitution, one row per step.
__device__ __forceinline__ void kda_solve_chunk(const KdaChunkView& c, int n) {
  const int dk = c.dk;
  const int dv = c.dv;
  const int ld = c.L.qk_ld;
  const int c_ld = c.L.c_ld;
  for (int idx = threadIdx.x; idx < n * dv; idx += blockDim.x) {
    const int r = idx / dv;
    const int j = idx % dv;
    float acc = 0.0f;
    for (int i = 0; i < dk; ++i) acc += c.G[r * ld + i] * c.S[i * dv + j];
    c.V[idx] = c.beta[r] * (c.V[idx] - acc);
  }
  for (int r = 0; r < n; ++r) {
    if (threadIdx.x < n) {
      const int col = threadIdx.x;
      float value = r == col ? 1.0f : 0.0f;
      for (int s = col; s < r; ++s) value -= c.A[r * c_ld + s] * c.T[s * c_ld + col];
      c.T[r * c_ld + col] = col <= r ? value : 0.0f;
    }
    __syncthreads();
  }
  for (int idx = threadIdx.x; idx < n * dv; idx += blockDim.x) {
    const int r = idx / dv;
    const int j = idx % dv;
    float acc = 0.0f;
    for (int s = 0; s <= r; ++s) acc += c.T[r * c_ld + s] * c.V[s * dv + j];
    c.U[idx] = acc;
  }
}

// The chunk's outputs (state before the chunk plus the intra-chunk part), then the state carried
// to the chunk's end.
__device__ __forceinline__ void kda_finish_chunk(const KdaParams& p, const KdaChunkView& c,
                                                 int64_t first, int t0, int n, int head) {
  const int dk = c.dk;
  const int dv = c.dv;
  const int ld = c.L.qk_ld;
  const int c_ld = c.L.c_ld;
  for (int idx = threadIdx.x; idx < n * dv; idx += blockDim.x) {
    const int r = idx / dv;
    const int j = idx % dv;
    float acc = 0.0f;
    for (int i = 0; i < dk; ++i) acc += c.Q[r * ld + i] * c.S[i * dv + j];
    for (int s = 0; s <= r; ++s) acc += c.QK[r * c_ld + s] * c.U[s * dv + j];
    p.out[((first + t0 + r) * p.num_heads + head) * dv + j] = __float2bfloat16(acc);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < dk * dv; idx += blockDim.x) {
    const int i = idx / dv;
    const int j = idx % dv;
    float acc = expf(c.g_last[i]) * c.S[idx];
    for (int s = 0; s < n; ++s) acc += c.K[s * ld + i] * c.U[s * dv + j];
    c.S[idx] = acc;
  }
}

__global__ void __launch_bounds__(kChunkThreads) kda_chunked_kernel(KdaParams p) {
  const int seq = blockIdx.y;
  const int head = blockIdx.x;
  const int dk = p.dk;
  const int dv = p.dv;
  extern __shared__ float smem[];
  const KdaChunkView c(smem, dk, dv);

  float* state = p.state + (static_cast<int64_t>(seq) * p.num_heads + head) * dk * dv;
  for (int idx = threadIdx.x; idx < dk * dv; idx += blockDim.x) c.S[idx] = state[idx];

  const int64_t first = p.seq_start[seq];
  const int len = p.seq_len[seq];
  for (int t0 = 0; t0 < len; t0 += kC) {
    const int n = min(kC, len - t0);
    __syncthreads();  // previous chunk done with every buffer
    kda_load_chunk(p, c, first, t0, n, head);
    __syncthreads();
    kda_decay_chunk(c, n);
    __syncthreads();
    kda_solve_chunk(c, n);
    __syncthreads();
    kda_finish_chunk(p, c, first, t0, n, head);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < dk * dv; idx += blockDim.x) state[idx] = c.S[idx];
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
