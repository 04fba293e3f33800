// The work of every op the simulator prices, one function per op kind: shape in, OpWork out.
//
// The simulator's FLOP and byte formulas, written once; the step model only asks them. They
// follow the engine's conventions (engine/op_cost.h) wherever the simulator knows the same
// quantities, so that fits of engine measurements price simulator queries of the same work
// (tests/sim/cost/op_work_parity_test.cc; docs/calibration.md, "Vocabulary and FLOP/byte
// conventions"). FLOPs are 2 per multiply-accumulate, bytes an ideal kernel's HBM traffic,
// activations BF16. Golden digests depend on the exact bits of every expression here: a rewrite
// equal in exact arithmetic (a reordered sum, a factored product) is a digest change.
#pragma once

#include <cstdint>
#include <span>

#include "sim/cost/op_work.h"
#include "sim/cost/seq_slice.h"
#include "sim/model/model_card.h"

namespace moesim::sim {

// The two attention ops of one layer on one GPU: prefill and decode parts are separate kernels.
struct AttentionWork {
  OpWork prefill;  // attn_<kind>_prefill over the prefill slices; empty() when there are none
  OpWork decode;   // attn_<kind>_decode over the decode slices; empty() when there are none
};

// ---- FLOPs per token (2 per multiply-accumulate; norms, activations, softmax not counted) ----

// FLOPs of the attention projections for one token (q/k/v/o, gates, short conv): 2 per matrix
// weight, independent of context and equal for MLA's absorbed and non-absorbed forms.
double attention_projection_flops(const AttentionSpec& a, int64_t hidden_size);
// FLOPs of the attention core for one token that attends to `context_tokens` tokens (itself
// included). GQA: 4 * heads * head_dim * context (scores and weighted values). MLA with
// mla_absorbed == false (the prefill form: keys and values up-projected per token):
// 2 * heads * (qk_nope + qk_rope + v) * context; with mla_absorbed == true (the decode form over
// the cached latent): 2 * heads * (2 * kv_lora_rank + qk_rope) * context. KDA: the delta-rule
// decay, key readout, rank-1 update and query readout, 7 * heads * dk * dv, constant in context.
double attention_core_flops(const AttentionSpec& a, int64_t context_tokens, bool mla_absorbed);
// Router FLOPs per token (hidden x experts score matmul, plus latent projections).
double router_flops(const MoeSpec& m, int64_t hidden_size);
// FLOPs of one routed expert for one token: 2 * expert_params.
double expert_flops_per_token(const MoeSpec& m, int64_t hidden_size);
// FLOPs of a layer's FFN for one token (dense FFN, or router + top_k routed + shared experts).
double ffn_flops_per_token(const FfnSpec& f, int64_t hidden_size);
// FLOPs to decode one token whose context (including itself) is `context_tokens` tokens:
// all layers' projections, attention cores (MLA absorbed), FFNs (top_k experts) and the head.
double decode_flops_per_token(const ModelCard& card, int64_t context_tokens);
// Average FLOPs per token to prefill a prompt of `prompt_tokens` tokens from empty (causal: token
// i attends to i + 1 tokens; MLA not absorbed), including the output head for every token.
double prefill_flops_per_token(const ModelCard& card, int64_t prompt_tokens);

// Attention (projections, core, cache / state traffic) of one layer for the slices `seqs` of one
// attention rank, as run by each of its `tp` >= 1 GPUs. Kinds attn_{mla,gqa,kda}_{prefill,decode}
// by attention.kind; dtype precision.attention; tokens = the part's new tokens.
// Per slice of n new tokens over c cached ones:
//   prefill FLOPs  n (P + core(c + (n + 1) / 2, naive)) + 2 U c   (integer (n + 1) / 2)
//   decode FLOPs   n (P + core(c + 1, absorbed))
// P = attention_projection_flops, core = attention_core_flops (sim/model/model_card.h), U = MLA's
// cache up-projection weights lora H (nope + v) (0 for GQA and KDA): MLA's naive prefill
// up-projects every cached row (its new rows are in P).
//   prefill bytes  kv (c + 2 n) + 4 n hidden + 2 S     decode bytes  kv (c + 2) + 4 n hidden + 2 S
// kv = cache bytes per token at precision.kv_cache (GQA: divided by min(tp, kv heads)); S = KDA
// recurrent + conv state per sequence at precision.recurrent_state, divided by tp.
// Each part: FLOPs / tp; bytes / tp + the layer's attention weights at precision.attention (its
// stored bits where precision.storage has them) / tp.
// core_flops / core_bytes: the core's share of them (n core(...) and the cache / state bytes, / tp)
// at core_dtype = precision.core_attention; the rest is the projections at precision.attention.
// attended_pairs: the (query, key) pairs of the core, n (c + (n + 1) / 2) prefill and n (c + 1)
// decode per slice (the contexts of the FLOPs above), not divided by tp.
// (So under TP the KDA state is divided by tp twice and the GQA cache by min(tp, kv heads) tp,
// and MLA's shared latent cache by tp: kept as the step model has always priced it.)
AttentionWork attention_work(const AttentionSpec& attention, int64_t hidden_size,
                             const Precision& precision, int32_t tp,
                             std::span<const SeqSlice> seqs);

// Bytes one GPU sends in the ring all-reduce of the attention output of `num_tokens` rows over a
// TP group of `tp` GPUs: 2 (tp - 1) / tp * tokens * hidden * 2 (BF16); 0 for tp == 1.
double attention_allreduce_bytes(int64_t num_tokens, int64_t hidden_size, int32_t tp);

// ONE RMSNorm over `num_tokens` rows of `hidden_size` (a layer has two: the step model prices
// this op twice): FLOPs 4 T hidden, bytes 4 T hidden (BF16 rows read and written; the norm
// weights are not counted), tokens T.
OpWork rmsnorm_work(int64_t num_tokens, int64_t hidden_size, DType dtype);

// Dense SwiGLU FFN of a layer on one GPU of a TP group of `tp`, over all `num_tokens` tokens of
// the rank: FLOPs 6 T hidden I / tp; bytes 3 hidden I weights at `dtype` / tp + 4 T hidden
// (rows in and out); tokens T.
OpWork dense_ffn_work(int64_t num_tokens, int64_t hidden_size, int64_t intermediate_size,
                      int32_t tp, DType dtype);

// MoE router over `num_tokens` tokens: FLOPs T router_flops(moe, hidden) (score GEMM, and the
// latent projections of latent MoEs); bytes 2 hidden E (BF16 score weights) + 2 T hidden (rows
// read; the top-k ids and weights written are not counted); tokens T; kind router with `dtype`.
OpWork router_work(const MoeSpec& moe, int64_t hidden_size, int64_t num_tokens, DType dtype);

// Permutation of `num_tokens` tokens into T top_k expert-ordered rows. Stands for the engine's
// permute and unpermute together: FLOPs 0, bytes 4 T top_k hidden (BF16 rows read and written
// once), tokens T top_k, dtype BF16.
OpWork permute_work(int64_t num_tokens, int64_t top_k, int64_t hidden_size);

// Expected distinct experts hit by `num_selections` selections spread uniformly over
// `num_experts` >= 1 experts: m (1 - (1 - 1/m)^sel); num_selections > 0 when num_experts == 1.
// `log1p_neg_inv_experts` must be std::log1p(-1.0 / num_experts) (hot-path callers cache it).
double expected_active_experts(double num_selections, int32_t num_experts,
                               double log1p_neg_inv_experts);
// The same, computing the logarithm.
double expected_active_experts(double num_selections, int32_t num_experts);

// Routed experts of one GPU: `num_selections` token-expert pairs over `active_experts` experts
// with tokens (may be fractional: an expectation). FLOPs sel expert_flops_per_token(moe, hidden);
// bytes active expert_weight_bytes at `dtype` + 4 sel hidden (token rows in and out; the
// intermediate activations stay on chip, as the engine counts them); tokens sel; num_experts
// ceil(active); kind expert_ffn with `dtype`.
OpWork expert_ffn_work(const MoeSpec& moe, int64_t hidden_size, DType dtype, int64_t num_selections,
                       double active_experts);

// Shared experts over `num_tokens` tokens: W = 3 hidden I_shared num_shared; FLOPs 2 T W; bytes
// W at `dtype` + 4 T hidden; tokens T. Meaningful only with moe.num_shared_experts > 0.
OpWork shared_expert_work(const MoeSpec& moe, int64_t hidden_size, int64_t num_tokens, DType dtype);

// Weighted combine of `num_tokens` tokens' top_k expert outputs (and the shared-expert row when
// `has_shared`): FLOPs 2 T top_k hidden; bytes (T top_k + T (1 + has_shared)) hidden 2 + 4 T top_k
// (BF16 rows read and written, FP32 gate weights read); tokens T; dtype BF16.
OpWork combine_work(int64_t num_tokens, int64_t top_k, bool has_shared, int64_t hidden_size);

// Output head of one GPU of a TP group of `tp` over `num_rows` rows (the rank's sequences that
// emit a token), vocabulary split over the group: FLOPs 2 rows hidden vocab / tp; bytes hidden
// vocab weights at `dtype` / tp (the activations are not counted); tokens rows.
OpWork lm_head_work(int64_t num_rows, int64_t hidden_size, int64_t vocab_size, int32_t tp,
                    DType dtype);

}  // namespace moesim::sim
