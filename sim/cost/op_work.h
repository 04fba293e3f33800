// One operation's work as the cost models see it: what kind of op, how many FLOPs and bytes,
// and the shape figures a calibrated model may fit on. The op-kind names are shared with the
// engine's measurement schema (docs/schemas/measurement.md), which is how measured times are
// matched to simulated ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "sim/model/model_card.h"

namespace moesim::sim {

enum class OpKind : uint8_t {
  kRmsNorm,
  kAttnMlaPrefill,
  kAttnMlaDecode,
  kAttnGqaPrefill,
  kAttnGqaDecode,
  kAttnKdaPrefill,
  kAttnKdaDecode,
  kRouter,
  kPermute,
  kExpertFfn,
  kSharedExpert,
  kDenseFfn,
  kCombine,
  kLmHead,
  kDispatchA2a,
  kCombineA2a,
};
inline constexpr int kNumOpKinds = 16;

// "rmsnorm", "attn_mla_prefill", "attn_mla_decode", "attn_gqa_prefill", "attn_gqa_decode",
// "attn_kda_prefill", "attn_kda_decode", "router", "permute", "expert_ffn", "shared_expert",
// "dense_ffn", "combine", "lm_head", "dispatch_a2a", "combine_a2a".
std::string_view op_kind_name(OpKind kind);
std::optional<OpKind> op_kind_from_name(std::string_view name);

struct OpWork {
  OpKind kind = OpKind::kRmsNorm;
  // Dtype of the operation's weights / main operands (chooses the peak FLOP/s).
  DType dtype = DType::kBF16;
  double flops = 0;            // 2 per multiply-accumulate
  double bytes = 0;            // HBM bytes read + written (weights, activations, cache)
  int64_t tokens = 0;          // tokens processed (new tokens; for experts, token-expert pairs)
  int64_t num_seqs = 0;        // sequences (attention)
  int64_t context_tokens = 0;  // sum over sequences of attended tokens (attention)
  int64_t num_experts = 0;     // experts with at least one token (expert_ffn)
  // Attention ops: the part of `flops` and `bytes` that is the attention core (QK^T and PV, the
  // MLA absorbed products over the cache, the KDA recurrence: their FLOPs; the cache / state
  // bytes), computed at `core_dtype`; the rest is the projections, at `dtype`. 0 elsewhere.
  double core_flops = 0;
  double core_bytes = 0;
  DType core_dtype = DType::kBF16;
  // Attention ops: the (query token, key) pairs the core attends, summed over the new tokens
  // (per slice of n new tokens over c cached: prefill n (c + (n + 1) / 2), decode n (c + 1)), so
  // that core_flops / attended_pairs is the FLOPs of one pair and attended_pairs / tokens the
  // mean keys a query attends. 0 elsewhere.
  double attended_pairs = 0;
  // GEMM shapes, for cost models that price GEMMs one by one. SwiGLU FFN ops (expert_ffn,
  // shared_expert, dense_ffn): hidden H and intermediate I (per GPU under TP, the shared experts
  // fused into one): gate/up n = 2 I, k = H; down n = H, k = I. Attention ops: hidden = the
  // model's hidden size (the projections' output rows). 0 when unknown.
  int64_t hidden = 0;
  int64_t ffn_intermediate = 0;

  bool empty() const { return tokens == 0 && flops == 0 && bytes == 0; }
  bool operator==(const OpWork&) const = default;
};

}  // namespace moesim::sim
