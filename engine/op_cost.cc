#include "engine/op_cost.h"

namespace moesim::engine {

namespace {

constexpr OpKind kAllKinds[] = {
    OpKind::kRmsnorm,        OpKind::kAttnMlaPrefill, OpKind::kAttnMlaDecode,
    OpKind::kAttnGqaPrefill, OpKind::kAttnGqaDecode,  OpKind::kAttnKdaPrefill,
    OpKind::kAttnKdaDecode,  OpKind::kDenseFfn,       OpKind::kRouter,
    OpKind::kPermute,        OpKind::kExpertFfn,      OpKind::kSharedExpert,
    OpKind::kUnpermute,      OpKind::kCombine,        OpKind::kDispatchA2a,
    OpKind::kCombineA2a,     OpKind::kLmHead};

double bytes_of(DType dtype) { return static_cast<double>(dtype_size_bytes(dtype)); }

}  // namespace

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kRmsnorm:
      return "rmsnorm";
    case OpKind::kAttnMlaPrefill:
      return "attn_mla_prefill";
    case OpKind::kAttnMlaDecode:
      return "attn_mla_decode";
    case OpKind::kAttnGqaPrefill:
      return "attn_gqa_prefill";
    case OpKind::kAttnGqaDecode:
      return "attn_gqa_decode";
    case OpKind::kAttnKdaPrefill:
      return "attn_kda_prefill";
    case OpKind::kAttnKdaDecode:
      return "attn_kda_decode";
    case OpKind::kDenseFfn:
      return "dense_ffn";
    case OpKind::kRouter:
      return "router";
    case OpKind::kPermute:
      return "permute";
    case OpKind::kExpertFfn:
      return "expert_ffn";
    case OpKind::kSharedExpert:
      return "shared_expert";
    case OpKind::kUnpermute:
      return "unpermute";
    case OpKind::kCombine:
      return "combine";
    case OpKind::kDispatchA2a:
      return "dispatch_a2a";
    case OpKind::kCombineA2a:
      return "combine_a2a";
    case OpKind::kLmHead:
      return "lm_head";
  }
  return "?";
}

std::optional<OpKind> op_kind_from_name(std::string_view name) {
  for (OpKind k : kAllKinds) {
    if (op_kind_name(k) == name) return k;
  }
  return std::nullopt;
}

std::vector<OpKind> all_op_kinds() { return {std::begin(kAllKinds), std::end(kAllKinds)}; }

double attention_pairs(const AttentionBatch& batch) {
  double pairs = 0;
  for (int64_t s = 0; s < batch.num_sequences(); ++s) {
    const double n = static_cast<double>(batch.new_tokens[s]);
    pairs += n * static_cast<double>(batch.context_tokens[s]) + n * (n + 1) / 2;
  }
  return pairs;
}

OpCost rmsnorm_cost(int64_t num_rows, int64_t hidden, int64_t num_norms, DType act) {
  OpCost c;
  c.weight_bytes = static_cast<double>(num_norms * hidden) * bytes_of(act);
  c.activation_bytes = 2.0 * static_cast<double>(num_rows * hidden) * bytes_of(act);
  return c;
}

OpCost mla_cost(const MlaShape& s, const AttentionBatch& batch, MlaForm form, DType weight,
                DType cache, DType act) {
  const double t = static_cast<double>(batch.total_new_tokens());
  const double r = static_cast<double>(batch.total_cache_rows());
  const double p = attention_pairs(batch);
  const double h = static_cast<double>(s.num_heads);
  const double hidden = static_cast<double>(s.hidden_size);
  const double q_lora = static_cast<double>(s.q_lora_rank);
  const double lora = static_cast<double>(s.kv_lora_rank);
  const double nope = static_cast<double>(s.qk_nope_head_dim);
  const double rope = static_cast<double>(s.qk_rope_head_dim);
  const double v = static_cast<double>(s.v_head_dim);
  // Weight elements: q (compressed or direct), kv_a, kv_b, o, and the two (or one) norms.
  const double q_params = s.q_lora_rank > 0 ? hidden * q_lora + q_lora + q_lora * h * (nope + rope)
                                            : hidden * h * (nope + rope);
  const double params =
      q_params + hidden * (lora + rope) + lora + lora * h * (nope + v) + h * v * hidden;
  OpCost c;
  const double q_proj_flops = s.q_lora_rank > 0
                                  ? 2 * t * (hidden * q_lora + q_lora * h * (nope + rope))
                                  : 2 * t * hidden * h * (nope + rope);
  c.flops = q_proj_flops + 2 * t * hidden * (lora + rope) + 2 * t * h * v * hidden;
  if (form == MlaForm::kNaive) {
    c.flops += 2 * r * lora * h * (nope + v) + 2 * p * h * (nope + rope + v);
  } else {
    c.flops += 2 * t * h * nope * lora + 2 * t * h * lora * v + 2 * p * h * (2 * lora + rope);
  }
  c.weight_bytes = params * bytes_of(weight);
  c.activation_bytes = 2 * t * hidden * bytes_of(act);
  c.kv_bytes = (r + t) * (lora + rope) * bytes_of(cache);
  return c;
}

OpCost gqa_cost(const GqaShape& s, const AttentionBatch& batch, DType weight, DType cache,
                DType act) {
  const double t = static_cast<double>(batch.total_new_tokens());
  const double r = static_cast<double>(batch.total_cache_rows());
  const double p = attention_pairs(batch);
  const double h = static_cast<double>(s.num_heads);
  const double hkv = static_cast<double>(s.num_kv_heads);
  const double d = static_cast<double>(s.head_dim);
  const double hidden = static_cast<double>(s.hidden_size);
  OpCost c;
  c.flops = 2 * t * hidden * d * (2 * h + 2 * hkv) + 4 * p * h * d;
  c.weight_bytes = (hidden * d * (2 * h + 2 * hkv) + (s.qk_norm ? 2 * d : 0)) * bytes_of(weight);
  c.activation_bytes = 2 * t * hidden * bytes_of(act);
  c.kv_bytes = 2 * (r + t) * hkv * d * bytes_of(cache);
  return c;
}

OpCost kda_cost(const KdaShape& s, const AttentionBatch& batch, DType weight, DType act) {
  const double t = static_cast<double>(batch.total_new_tokens());
  const double seqs = static_cast<double>(batch.num_sequences());
  const double h = static_cast<double>(s.num_heads);
  const double dk = static_cast<double>(s.head_dim_k);
  const double dv = static_cast<double>(s.head_dim_v);
  const double hidden = static_cast<double>(s.hidden_size);
  const double rank = static_cast<double>(s.gate_lora_rank);
  const double taps = static_cast<double>(s.short_conv_kernel);
  const double channels = h * (2 * dk + dv);
  // GEMM weight elements: q, k, v; forget gate (hidden r + r H dk); beta (hidden H); output
  // gate (hidden r + r H dv); output projection (H dv hidden).
  double gemm_params =
      hidden * channels + hidden * rank + rank * h * dk + hidden * h + h * dv * hidden;
  if (s.output_gate) gemm_params += hidden * rank + rank * h * dv;
  OpCost c;
  c.flops = 2 * t * gemm_params + 2 * t * taps * channels + 6 * t * h * dk * dv;
  // Other weights: conv taps, o_norm (weight dtype); a_log and dt_bias (FP32).
  c.weight_bytes = (gemm_params + taps * channels + dv) * bytes_of(weight) + (h + h * dk) * 4;
  c.activation_bytes = 2 * t * hidden * bytes_of(act);
  c.kv_bytes = 2 * seqs * (h * dk * dv + (taps - 1) * channels) * 4;
  return c;
}

OpCost router_cost(int64_t num_tokens, int64_t hidden, int64_t num_experts, int64_t top_k,
                   DType weight, DType act) {
  const double t = static_cast<double>(num_tokens);
  OpCost c;
  c.flops = 2 * t * static_cast<double>(hidden * num_experts);
  c.weight_bytes = static_cast<double>(hidden * num_experts) * bytes_of(weight);
  c.activation_bytes =
      t * static_cast<double>(hidden) * bytes_of(act) + t * static_cast<double>(top_k) * 8;
  return c;
}

OpCost permute_cost(int64_t num_rows, int64_t hidden, DType act) {
  OpCost c;
  c.activation_bytes = 2 * static_cast<double>(num_rows * hidden) * bytes_of(act) +
                       4 * static_cast<double>(num_rows);
  return c;
}

OpCost ffn_cost(const std::vector<int64_t>& tokens_per_expert, int64_t hidden, int64_t intermediate,
                DType weight, DType act) {
  double tokens = 0;
  double active_experts = 0;
  for (int64_t n : tokens_per_expert) {
    tokens += static_cast<double>(n);
    if (n > 0) active_experts += 1;
  }
  const double per_expert_params = 3 * static_cast<double>(hidden * intermediate);
  OpCost c;
  c.flops = 6 * tokens * static_cast<double>(hidden * intermediate);
  c.weight_bytes =
      active_experts * (per_expert_params * bytes_of(weight) + (weight == DType::kFP8E4M3 ? 8 : 0));
  c.activation_bytes = 2 * tokens * static_cast<double>(hidden) * bytes_of(act);
  return c;
}

OpCost combine_cost(int64_t num_tokens, int64_t top_k, int64_t hidden, bool has_shared, DType act) {
  const double t = static_cast<double>(num_tokens);
  const double k = static_cast<double>(top_k);
  OpCost c;
  c.flops = 2 * t * k * static_cast<double>(hidden);
  c.activation_bytes =
      (t * k + t * (has_shared ? 2 : 1)) * static_cast<double>(hidden) * bytes_of(act) + 4 * t * k;
  return c;
}

OpCost lm_head_cost(int64_t num_rows, int64_t hidden, int64_t vocab, DType weight, DType act) {
  return router_cost(num_rows, hidden, vocab, 1, weight, act);
}

OpCost all_to_all_cost(double send_bytes, double recv_bytes) {
  OpCost c;
  c.activation_bytes = send_bytes + recv_bytes;
  return c;
}

}  // namespace moesim::engine
