// Launchers of every CUDA kernel of the engine (STYLE principle 16: one kernel and its launcher
// per operation, all launchers declared here).
//
// Conventions shared by every launcher:
// - Pointers are device pointers; tensors are contiguous and row-major; shapes are given in the
//   comment of each launcher as [dim0, dim1, ...].
// - Activations and weights are BF16, accumulation is FP32, outputs are rounded once.
// - Work is enqueued on `stream`; launchers do not synchronise. A launch-configuration error or
//   a violated precondition throws CudaError (engine/cuda/check.h); faults inside a kernel
//   surface at the caller's next synchronising call.
// - Launchers that need cuBLAS take a handle and set its stream to `stream`.
// - Zero-sized work (no rows, no sequences) enqueues nothing.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace moesim::engine::cuda {

using bf16 = __nv_bfloat16;
using fp8e4m3 = __nv_fp8_e4m3;

// ---- Normalisation and element-wise ops ----------------------------------------------------

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + epsilon) * weight[:] over hidden_size elements.
// Row r of x starts at x + r * x_row_stride (elements), of out at out + r * out_row_stride, so a
// norm can run on the leading columns of a wider matrix or per head (rows = tokens * heads).
// weight: [hidden_size]. out may alias x.
void launch_rmsnorm(const bf16* x, int64_t x_row_stride, const bf16* weight, bf16* out,
                    int64_t out_row_stride, int64_t num_rows, int hidden_size, float epsilon,
                    cudaStream_t stream);

// out[r, c] = silu(gate_up[r, c]) * gate_up[r, intermediate_size + c]: the gate is the first
// half of each row, the up projection the second half.
// gate_up: [num_rows, 2 * intermediate_size]; out: [num_rows, intermediate_size].
void launch_swiglu(const bf16* gate_up, bf16* out, int64_t num_rows, int intermediate_size,
                   cudaStream_t stream);

// ---- MoE routing, permutation and combine --------------------------------------------------

enum class RouterScoring { kSoftmax, kSigmoid };

// Scores logits [num_tokens, num_experts] (softmax over experts, or element-wise sigmoid), picks
// the top_k experts per token by score + correction_bias (bias may be null; ties go to the lower
// expert index) and writes their ids and weights [num_tokens, top_k], best first. Weights are
// the scores (without bias), divided by their sum over the chosen experts when
// `normalize_weights`, then multiplied by `routed_scaling`.
// Preconditions: 1 <= top_k <= min(num_experts, 32), num_experts <= 1024.
void launch_router_topk(const float* logits, const float* correction_bias, RouterScoring scoring,
                        bool normalize_weights, float routed_scaling, int32_t* topk_expert,
                        float* topk_weight, int64_t num_tokens, int num_experts, int top_k,
                        cudaStream_t stream);

// Router logits [num_tokens, num_experts] (FP32) = x [num_tokens, hidden_size] (BF16) times
// router_weight [hidden_size, num_experts] (BF16), through cuBLAS with FP32 accumulation.
void router_logits(cublasHandle_t handle, const bf16* x, const bf16* router_weight, float* logits,
                   int64_t num_tokens, int hidden_size, int num_experts, cudaStream_t stream);

// Gather: out[r, :] = in[src_row_idx[r], :] for r < num_out_rows (token permutation by expert).
void launch_permute_rows(const bf16* in, const int32_t* src_row_idx, bf16* out,
                         int64_t num_out_rows, int hidden_size, cudaStream_t stream);

// Scatter: out[dst_row_idx[r], :] = in[r, :] for r < num_in_rows (un-permutation back to slot
// order). dst_row_idx entries must be distinct.
void launch_unpermute_rows(const bf16* in, const int32_t* dst_row_idx, bf16* out,
                           int64_t num_in_rows, int hidden_size, cudaStream_t stream);

// out[t, :] = residual[t, :] + sum_j weight[t, j] * rows[row_idx[t * top_k + j], :], FP32
// accumulation; entries with row_idx < 0 (selections executed elsewhere) are skipped; residual
// may be null (treated as zero). rows: [*, hidden_size]; out, residual: [num_tokens, hidden_size].
void launch_weighted_combine(const bf16* rows, const int32_t* row_idx, const float* weight,
                             const bf16* residual, bf16* out, int64_t num_tokens, int top_k,
                             int hidden_size, cudaStream_t stream);

// ---- FP8 quantisation ----------------------------------------------------------------------

// Per-tensor E4M3 quantisation of x [num_elements]: scale = max(|x|) / 448 (1 when x is all
// zero), out = satfinite_rne(x / scale). Writes the dequantisation scale to *scale (device) so
// that x ~= out * scale. `absmax_scratch` is one device float.
void launch_quantize_fp8_per_tensor(const bf16* x, int64_t num_elements, fp8e4m3* out, float* scale,
                                    float* absmax_scratch, cudaStream_t stream);

// ---- Attention -----------------------------------------------------------------------------

// Caches are packed per sequence (engine/backend.h AttentionBatch): a sequence's keys are rows
// [cache_start, cache_start + kv_len) of k [rows, num_kv_heads, head_dim_qk] and v [rows,
// num_kv_heads, head_dim_v]. Query head h uses KV head h / (num_q_heads / num_kv_heads).
// Scores are softmax_scale * q . k; head dims <= 256.
struct AttentionShape {
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim_qk = 0;
  int head_dim_v = 0;
  float softmax_scale = 0.0f;
};

// Prefill (chunked prefill included), tiled flash-attention style: sequence b has num_new[b]
// new tokens whose queries are rows [q_start[b], q_start[b] + num_new[b]) of q [*, num_q_heads,
// head_dim_qk]; its keys are cache rows cache_start[b] + [0, num_ctx[b] + num_new[b]), the new
// tokens' own keys last. New token i attends to the first num_ctx[b] + i + 1 of them (full over
// the context, causal over the new tokens). out: [*, num_q_heads, head_dim_v], same rows as q.
// q_start, num_new, num_ctx, cache_start: device int32 [num_seqs]; max_new_tokens (host) >=
// every num_new[b] sizes the grid.
void launch_attention_prefill(const AttentionShape& shape, const bf16* q, const bf16* k,
                              const bf16* v, const int32_t* q_start, const int32_t* num_new,
                              const int32_t* num_ctx, const int32_t* cache_start, int num_seqs,
                              int max_new_tokens, bf16* out, cudaStream_t stream);

// Split-K decode: query row i of q [num_queries, num_q_heads, head_dim_qk] attends to cache
// rows cache_start[i] + [0, kv_len[i]) (device int32 [num_queries], kv_len >= 1). Causal
// multi-token chunks are expressed as one query row per token with growing kv_len.
// out: [num_queries, num_q_heads, head_dim_v]. num_splits >= 1 splits each context into that
// many ranges; workspace has gqa_decode_workspace_bytes(...) bytes.
int64_t gqa_decode_workspace_bytes(const AttentionShape& shape, int num_queries, int num_splits);
void launch_gqa_decode(const AttentionShape& shape, const bf16* q, const bf16* k, const bf16* v,
                       const int32_t* cache_start, const int32_t* kv_len, int num_queries,
                       int num_splits, void* workspace, bf16* out, cudaStream_t stream);

// Number of context splits so that a decode grid of `num_blocks_per_split` blocks fills
// `num_sms` SMs about twice, at least one 32-token tile per split, at most 64 splits.
int decode_num_splits(int64_t num_blocks_per_split, int64_t max_kv_len, int num_sms);

// Merges split-K partial attention results: partial_out [num_rows, num_splits, num_heads,
// head_dim] holds each split's softmax-normalised output, partial_lse2 [num_rows, num_splits,
// num_heads] its log2-sum-exp2 of log2e-scaled scores (-inf for an empty split). out [num_rows,
// num_heads, head_dim] = sum_s 2^(lse_s - M) out_s / sum_s 2^(lse_s - M), M = max_s lse_s.
void launch_combine_attention_splits(const float* partial_out, const float* partial_lse2,
                                     int num_rows, int num_splits, int num_heads, int head_dim,
                                     bf16* out, cudaStream_t stream);

// MLA decode in the absorbed form, one query row per new token. For row i and head h:
//   q_lat = q_nope[i, h] W_UK[h]^T               ([qk_nope_head_dim] -> [kv_lora_rank])
//   s_t   = softmax_scale (q_lat . c_t + q_rope[i, h] . r_t),  t < kv_len[i]
//   out[i, h] = (sum_t softmax(s)_t c_t) W_UV[h]  ([kv_lora_rank] -> [v_head_dim])
// q: [num_queries, num_heads * (nope + rope)] (per head: nope part, then rotated rope part);
// latent_cache: [rows, kv_lora_rank + rope], row t = [c_t, r_t], a row's keys at cache_start[i]
// + [0, kv_len[i]); w_kv_b: [kv_lora_rank, num_heads * (nope + v)] (per head: W_UK columns, then
// W_UV columns; engine/backend.h MlaWeights); out: [num_queries, num_heads * v_head_dim].
// Attention over the latents runs on tensor cores (WMMA BF16, FP32 accumulate), split over the
// context; the absorption and un-absorption are strided-batched cuBLAS GEMMs over heads.
// Preconditions: kv_lora_rank and qk_rope_head_dim multiples of 16, kv_lora_rank <= 512,
// qk_rope_head_dim <= 128.
struct MlaDecodeShape {
  int num_heads = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  float softmax_scale = 0.0f;
};
// Head groups of the MLA decode kernel (heads per block): the grid is num_queries x
// ceil(num_heads / kMlaHeadsPerBlock) x num_splits.
inline constexpr int kMlaHeadsPerBlock = 16;
int64_t mla_decode_workspace_bytes(const MlaDecodeShape& shape, int num_queries, int num_splits);
void launch_mla_decode(cublasHandle_t handle, const MlaDecodeShape& shape, const bf16* q,
                       const bf16* latent_cache, const int32_t* cache_start, const int32_t* kv_len,
                       const bf16* w_kv_b, int num_queries, int num_splits, void* workspace,
                       bf16* out, cudaStream_t stream);

// ---- Layer glue (layer_ops.cu) ---------------------------------------------------------------

// RoPE, half-split ("NeoX") form with base 10000, in place: for row r and head h the rope_dim
// elements at x + r * row_stride + h * head_stride + rope_offset are rotated in pairs (j, j +
// rope_dim / 2) by angle positions[r] * 10000^(-2j / rope_dim) (computed in FP64, as the CPU).
void launch_rope(bf16* x, int64_t row_stride, int64_t num_rows, int num_heads, int head_stride,
                 int rope_offset, int rope_dim, const int32_t* positions, cudaStream_t stream);

// MLA naive form: expands cache rows into per-head keys and values. kv_up [rows, heads * (nope
// + v_dim)] = latent W_kv_b; latent_cache [rows, lora + rope]. Writes k [rows, heads, nope +
// rope] = [kv_up nope part, shared rotary key] and v [rows, heads, v_dim].
void launch_mla_expand_kv(const bf16* kv_up, const bf16* latent_cache, bf16* k, bf16* v,
                          int64_t num_rows, int num_heads, int nope, int rope, int v_dim, int lora,
                          cudaStream_t stream);

// x[r, h, :] <- x[r, h, :] / sqrt(sum(x[r, h, :]^2) + epsilon) * scale, in place, for
// num_rows x num_heads blocks of head_dim contiguous elements.
void launch_l2norm_heads(bf16* x, int64_t num_rows, int num_heads, int head_dim, float epsilon,
                         float scale, cudaStream_t stream);

// KDA short convolution: for sequence s (tokens [token_start[s], token_start[s] + num_new[s]) of
// proj [*, channels]) and channel c, the causal depthwise convolution with conv_w [taps,
// channels] (tap 0 oldest) over [conv_state[s] (taps - 1 rows, FP32); new rows], then SiLU, into
// out [*, channels]; conv_state[s] becomes the last taps - 1 inputs. taps in [1, 16].
// The state is addressed inside a wider per-sequence state whose rows have state_row_width
// channels, this call's channels starting at state_channel_offset (q, k and v share one state).
void launch_kda_conv_silu(const bf16* proj, const bf16* conv_w, float* conv_state,
                          int state_row_width, int state_channel_offset, const int32_t* token_start,
                          const int32_t* num_new, int num_seqs, int taps, int channels, bf16* out,
                          cudaStream_t stream);

// KDA gates: log_alpha[t, c] = -exp(a_log[c / head_dim_k]) * softplus(f[t, c] + dt_bias[c]) for
// c < num_heads * head_dim_k, and beta[t, h] = sigmoid(beta_logit[t, h]).
void launch_kda_gates(const bf16* f, const float* a_log, const float* dt_bias,
                      const bf16* beta_logit, int64_t num_tokens, int num_heads, int head_dim_k,
                      float* log_alpha, float* beta, cudaStream_t stream);

// Byte transpose: out[c, r] = in[r, c] for in [num_rows, num_cols] of 1-byte elements (FP8
// weights from the engine's [in, out] layout to the [out, in] layout cuBLASLt FP8 needs).
void launch_transpose_bytes(const uint8_t* in, int64_t num_rows, int64_t num_cols, uint8_t* out,
                            cudaStream_t stream);

// dst[i] = round(synthetic_value(seed, i) * scale) to dtype for i < num_elements
// (engine/synthetic.h, bit-identical to the CPU backend). dtype_code: 0 FP32, 1 BF16, 2 FP8 E4M3.
void launch_fill_synthetic(void* dst, int dtype_code, int64_t num_elements, uint64_t seed,
                           float scale, cudaStream_t stream);

// x[i] <- x[i] * sigmoid(gate[i]) for i < num_elements.
void launch_sigmoid_gate(bf16* x, const bf16* gate, int64_t num_elements, cudaStream_t stream);

// Per-row FP8 E4M3 quantisation: row_scale[r] = max|x[r, :]| / 448 (1 for a zero row),
// out[r, c] = satfinite_rne(x[r, c] / row_scale[r]). x [num_rows, cols].
void launch_quantize_fp8_rows(const bf16* x, int64_t num_rows, int cols, fp8e4m3* out,
                              float* row_scale, cudaStream_t stream);

// out[r, c] = bf16(y[r, c] * row_scale[r] * (*tensor_scale)): dequantises an FP8 GEMM result
// (y FP32 [num_rows, cols]; tensor_scale a device float, e.g. the expert's weight scale).
void launch_dequantize_rows(const float* y, const float* row_scale, const float* tensor_scale,
                            int64_t num_rows, int cols, bf16* out, cudaStream_t stream);

// ---- KDA (gated delta rule with per-channel decay) -----------------------------------------

// Per sequence and head, with state S [head_dim_k, head_dim_v] (FP32):
//   S_t = (I - beta_t k_t k_t^T) Diag(alpha_t) S_{t-1} + beta_t k_t v_t^T,   o_t = S_t^T q_t
// with alpha_t = exp(log_alpha_t) (per channel of k, log_alpha <= 0).
// Preconditions: head_dim_k, head_dim_v <= 128.
struct KdaKernelShape {
  int num_seqs = 0;
  int num_heads = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
};

// Chunked form (prefill): tokens of sequence b are rows [seq_start[b], seq_start[b] + seq_len[b])
// of q, k [*, num_heads, head_dim_k], v [*, num_heads, head_dim_v], log_alpha [*, num_heads,
// head_dim_k] (FP32) and beta [*, num_heads] (FP32); out [*, num_heads, head_dim_v].
// state [num_seqs, num_heads, head_dim_k, head_dim_v] (FP32) holds S before the first token on
// entry and S after the last on return. Within a chunk of kKdaChunkTokens tokens the update is
// applied in the WY / UT-transform form; the state is carried across chunks.
inline constexpr int kKdaChunkTokens = 32;
void launch_kda_chunked(const KdaKernelShape& shape, const bf16* q, const bf16* k, const bf16* v,
                        const float* log_alpha, const float* beta, const int32_t* seq_start,
                        const int32_t* seq_len, float* state, bf16* out, cudaStream_t stream);

// Recurrent form for one token per sequence (decode): q, k [num_seqs, num_heads, head_dim_k],
// v [num_seqs, num_heads, head_dim_v], log_alpha [num_seqs, num_heads, head_dim_k], beta
// [num_seqs, num_heads]; state updated in place; out [num_seqs, num_heads, head_dim_v].
void launch_kda_decode(const KdaKernelShape& shape, const bf16* q, const bf16* k, const bf16* v,
                       const float* log_alpha, const float* beta, float* state, bf16* out,
                       cudaStream_t stream);

}  // namespace moesim::engine::cuda
