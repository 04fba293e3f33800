// The operation vocabulary of measurements and the one function per operation that counts its
// FLOPs and bytes (docs/schemas/measurement.md repeats these formulas; calibration fits cost
// models against them, so they change only with the schema version).
//
// Conventions: FLOPs are 2 per multiply-accumulate of GEMMs, attention products and the KDA
// recurrence; norms, softmax, activations, RoPE, gates' elementwise maths are not counted.
// Bytes are those an ideal kernel moves to and from device memory once: every weight tensor the
// op reads (experts with no tokens are not read), activations in and out, and KV cache /
// recurrent state read and written. Attention "pairs" P = sum over sequences of
// n * context + n (n + 1) / 2 (query-key pairs under the causal mask, n = new tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/backend.h"

namespace moesim::engine {

enum class OpKind {
  kRmsnorm,         // both RMSNorms of a layer (pre-attention and pre-FFN): 2 T rows
  kAttnMlaPrefill,  // MLA of the prefill sequences, naive form
  kAttnMlaDecode,   // MLA of the decode sequences, absorbed form
  kAttnGqaPrefill,
  kAttnGqaDecode,
  kAttnKdaPrefill,
  kAttnKdaDecode,
  kDenseFfn,
  kRouter,
  kPermute,
  kExpertFfn,
  kSharedExpert,
  kUnpermute,
  kCombine,
  kDispatchA2a,
  kCombineA2a,
  kLmHead,  // output head: logits GEMM + softmax + greedy pick, once per step (layer -1)
};

// "rmsnorm", "attn_mla_prefill", "attn_mla_decode", "attn_gqa_prefill", "attn_gqa_decode",
// "attn_kda_prefill", "attn_kda_decode", "dense_ffn", "router", "permute", "expert_ffn",
// "shared_expert", "unpermute", "combine", "dispatch_a2a", "combine_a2a", "lm_head".
std::string_view op_kind_name(OpKind kind);
std::optional<OpKind> op_kind_from_name(std::string_view name);
// Every kind, in declaration order.
std::vector<OpKind> all_op_kinds();

struct OpCost {
  double flops = 0;
  double weight_bytes = 0;
  double activation_bytes = 0;
  double kv_bytes = 0;  // KV / latent cache, or KDA recurrent + conv state
  double total_bytes() const { return weight_bytes + activation_bytes + kv_bytes; }
};

// Attended query-key pairs of a batch (see P above).
double attention_pairs(const AttentionBatch& batch);

// `num_rows` rows of width `hidden`: FLOPs 0; activations 2 * rows * hidden * act (read +
// write); weights hidden * act per norm applied (num_norms).
OpCost rmsnorm_cost(int64_t num_rows, int64_t hidden, int64_t num_norms, DType act);

// MLA: projections 2 T (hidden q_lora + q_lora H (nope+rope) + hidden (lora+rope)
// + H v hidden) (q_lora == 0: 2 T hidden H (nope+rope) for the query). Naive adds the cache
// up-projection 2 R lora H (nope+v) (R = cache rows) and attention 2 P H (nope+rope+v).
// Absorbed adds 2 T H nope lora + 2 T H lora v and attention 2 P H (2 lora + rope).
// KV bytes: R (lora+rope) cache (read) + T (lora+rope) cache (write).
OpCost mla_cost(const MlaShape& shape, const AttentionBatch& batch, MlaForm form, DType weight,
                DType cache, DType act);

// GQA: projections 2 T hidden d (2 H + 2 Hkv); attention 4 P H d. KV bytes: 2 R Hkv d cache
// (read) + 2 T Hkv d cache (write).
OpCost gqa_cost(const GqaShape& shape, const AttentionBatch& batch, DType weight, DType cache,
                DType act);

// KDA: GEMMs 2 T G with G = hidden H (2 dk + dv) + hidden r + r H dk + hidden H + H dv hidden
// (+ hidden r + r H dv with the output gate); conv 2 T kernel H (2 dk + dv); recurrence
// 6 T H dk dv. Weights G + kernel H (2 dk + dv) + dv in the weight dtype, a_log and dt_bias FP32.
// KV bytes: recurrent (S H dk dv) and conv (S (kernel - 1) H (2 dk + dv)) FP32 state, read and
// written (S = sequences).
OpCost kda_cost(const KdaShape& shape, const AttentionBatch& batch, DType weight, DType act);

// Router GEMM: 2 T hidden E; weights hidden E; activations T hidden act + T top_k (4 + 4).
OpCost router_cost(int64_t num_tokens, int64_t hidden, int64_t num_experts, int64_t top_k,
                   DType weight, DType act);

// Row gather/scatter of num_rows rows: activations 2 num_rows hidden act + 4 num_rows index.
OpCost permute_cost(int64_t num_rows, int64_t hidden, DType act);

// Grouped SwiGLU: 6 N hidden I (N = sum of tokens); weights 3 hidden I weight per expert with
// tokens (+ 8 bytes of scales when FP8); activations 2 N hidden act.
OpCost ffn_cost(const std::vector<int64_t>& tokens_per_expert, int64_t hidden, int64_t intermediate,
                DType weight, DType act);

// Weighted combine: 2 T top_k hidden; activations (T top_k + T (1 + has_shared)) hidden act +
// 4 T top_k.
OpCost combine_cost(int64_t num_tokens, int64_t top_k, int64_t hidden, bool has_shared, DType act);

// Output head over num_rows rows (one per sequence of the GPU) and a vocabulary shard of `vocab`
// columns: logits GEMM 2 rows hidden vocab; weights hidden vocab; activations rows hidden act +
// 8 rows (the picked token id and its probability; the logits stay on chip in a fused GEMM +
// sampling kernel). The router's formula with E = vocab and top_k = 1.
OpCost lm_head_cost(int64_t num_rows, int64_t hidden, int64_t vocab, DType weight, DType act);

// All-to-all: FLOPs 0; activations = bytes this rank sends plus bytes it receives.
OpCost all_to_all_cost(double send_bytes, double recv_bytes);

}  // namespace moesim::engine
