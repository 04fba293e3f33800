#include "sim/cost/op_formulas.h"

#include <algorithm>
#include <cmath>

namespace moesim::sim {

namespace {

double d(int64_t v) { return static_cast<double>(v); }

// Core FLOPs at a possibly fractional average context.
double core_flops(const AttentionSpec& a, double context_tokens, bool mla_absorbed) {
  switch (a.kind) {
    case AttentionKind::kMLA: {
      const MlaSpec& m = a.mla;
      const double per_ctx = mla_absorbed
                                 ? d(2 * m.kv_lora_rank + m.qk_rope_head_dim)
                                 : d(m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim);
      return 2.0 * d(m.num_heads) * per_ctx * context_tokens;
    }
    case AttentionKind::kGQA:
      return 4.0 * d(a.gqa.num_heads) * d(a.gqa.head_dim) * context_tokens;
    case AttentionKind::kKDA:
      return 7.0 * d(a.kda.num_heads) * d(a.kda.head_dim_k) * d(a.kda.head_dim_v);
  }
  return 0;
}

double flops_per_token(const ModelCard& card, double context_tokens, bool mla_absorbed) {
  double f = 2.0 * d(card.vocab_size) * d(card.hidden_size);  // output head
  for (const LayerSpec& l : card.layers) {
    f += attention_projection_flops(l.attention, card.hidden_size);
    f += core_flops(l.attention, context_tokens, mla_absorbed);
    f += ffn_flops_per_token(l.ffn, card.hidden_size);
  }
  return f;
}

}  // namespace

double attention_projection_flops(const AttentionSpec& a, int64_t hidden_size) {
  return 2.0 * attention_projection_params(a, hidden_size);
}

double attention_core_flops(const AttentionSpec& a, int64_t context_tokens, bool mla_absorbed) {
  return core_flops(a, d(context_tokens), mla_absorbed);
}

double router_flops(const MoeSpec& m, int64_t hidden_size) {
  double f = 2.0 * d(hidden_size) * d(m.num_routed_experts);
  if (m.latent_dim > 0) f += 4.0 * d(hidden_size) * d(m.latent_dim);
  return f;
}

double expert_flops_per_token(const MoeSpec& m, int64_t hidden_size) {
  return 2.0 * expert_params(m, hidden_size);
}

double ffn_flops_per_token(const FfnSpec& f, int64_t hidden_size) {
  if (!f.is_moe) return 2.0 * gated_ffn_params(hidden_size, f.intermediate_size);
  const MoeSpec& m = f.moe;
  return router_flops(m, hidden_size) + d(m.top_k) * expert_flops_per_token(m, hidden_size) +
         2.0 * shared_expert_params(m, hidden_size);
}

double decode_flops_per_token(const ModelCard& card, int64_t context_tokens) {
  return flops_per_token(card, d(context_tokens), /*mla_absorbed=*/true);
}

double prefill_flops_per_token(const ModelCard& card, int64_t prompt_tokens) {
  // Core FLOPs are linear in context, so the mean over contexts 1..P is the value at (P + 1) / 2.
  return flops_per_token(card, (d(prompt_tokens) + 1.0) / 2.0, /*mla_absorbed=*/false);
}

namespace {

double bytes_per_param(DType d) { return bits_per_element(d) / 8.0; }

OpWork make_work(OpKind kind, DType dtype, double flops, double bytes, int64_t tokens) {
  OpWork w;
  w.kind = kind;
  w.dtype = dtype;
  w.flops = flops;
  w.bytes = bytes;
  w.tokens = tokens;
  return w;
}

OpKind prefill_kind(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kMLA:
      return OpKind::kAttnMlaPrefill;
    case AttentionKind::kGQA:
      return OpKind::kAttnGqaPrefill;
    case AttentionKind::kKDA:
      return OpKind::kAttnKdaPrefill;
  }
  return OpKind::kAttnKdaPrefill;
}

OpKind decode_kind(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kMLA:
      return OpKind::kAttnMlaDecode;
    case AttentionKind::kGQA:
      return OpKind::kAttnGqaDecode;
    case AttentionKind::kKDA:
      return OpKind::kAttnKdaDecode;
  }
  return OpKind::kAttnKdaDecode;
}

}  // namespace

AttentionWork attention_work(const AttentionSpec& a, int64_t hidden, const Precision& precision,
                             int32_t tp_gpus, std::span<const SeqSlice> seqs) {
  const DType wdt = precision.attention;
  const double tp = static_cast<double>(tp_gpus);
  const double proj_flops = attention_projection_flops(a, hidden);
  // Stored bytes of the attention tensor group (its storage format where the card has one).
  const double weight_bytes = attention_params(a, hidden) *
                              (weight_bits_per_element(precision, TensorGroup::kAttention) / 8.0) /
                              tp;
  const double kv_per_token =
      kv_bytes_per_token(a, precision.kv_cache) /
      (a.kind == AttentionKind::kGQA
           ? static_cast<double>(std::min<int64_t>(tp_gpus, a.gqa.num_kv_heads))
           : 1.0);
  const double state_bytes = recurrent_state_bytes_per_sequence(a, precision.recurrent_state) / tp;
  // Activations read and written once (BF16); cache rows read (context + new) and written (new).
  const double act_bytes_per_token = 2.0 * static_cast<double>(hidden) * 2.0;
  const double mla_kv_up_params =
      a.kind == AttentionKind::kMLA
          ? static_cast<double>(a.mla.kv_lora_rank * a.mla.num_heads *
                                (a.mla.qk_nope_head_dim + a.mla.v_head_dim))
          : 0.0;

  double pf_flops = 0, pf_bytes = 0, dc_flops = 0, dc_bytes = 0;
  double pf_core_flops = 0, pf_core_bytes = 0, dc_core_flops = 0, dc_core_bytes = 0;
  double pf_pairs = 0, dc_pairs = 0;
  int64_t pf_tokens = 0, dc_tokens = 0;
  for (const SeqSlice& s : seqs) {
    const double n = static_cast<double>(s.new_tokens);
    if (s.prefill) {
      // Token i of the chunk attends to context + i keys: the mean is context + (n + 1) / 2.
      const int64_t mean_ctx = s.context_tokens + (s.new_tokens + 1) / 2;
      const double core = attention_core_flops(a, mean_ctx, false);
      const double cache = kv_per_token * static_cast<double>(s.context_tokens + 2 * s.new_tokens);
      pf_flops +=
          n * (proj_flops + core) + 2.0 * mla_kv_up_params * static_cast<double>(s.context_tokens);
      pf_bytes += cache + n * act_bytes_per_token + 2.0 * state_bytes;
      pf_core_flops += n * core;
      pf_core_bytes += cache + 2.0 * state_bytes;
      pf_pairs += n * static_cast<double>(mean_ctx);
      pf_tokens += s.new_tokens;
    } else {
      const double core = attention_core_flops(a, s.context_tokens + 1, true);
      const double cache = kv_per_token * static_cast<double>(s.context_tokens + 2);
      dc_flops += n * (proj_flops + core);
      dc_bytes += cache + n * act_bytes_per_token + 2.0 * state_bytes;
      dc_core_flops += n * core;
      dc_core_bytes += cache + 2.0 * state_bytes;
      dc_pairs += n * static_cast<double>(s.context_tokens + 1);
      dc_tokens += s.new_tokens;
    }
  }
  AttentionWork w;
  w.prefill = make_work(prefill_kind(a.kind), wdt, 0, 0, 0);
  w.decode = make_work(decode_kind(a.kind), wdt, 0, 0, 0);
  if (pf_tokens > 0) {
    w.prefill =
        make_work(w.prefill.kind, wdt, pf_flops / tp, pf_bytes / tp + weight_bytes, pf_tokens);
    w.prefill.core_flops = pf_core_flops / tp;
    w.prefill.core_bytes = pf_core_bytes / tp;
    w.prefill.attended_pairs = pf_pairs;
  }
  if (dc_tokens > 0) {
    w.decode =
        make_work(w.decode.kind, wdt, dc_flops / tp, dc_bytes / tp + weight_bytes, dc_tokens);
    w.decode.core_flops = dc_core_flops / tp;
    w.decode.core_bytes = dc_core_bytes / tp;
    w.decode.attended_pairs = dc_pairs;
  }
  w.prefill.core_dtype = precision.core_attention;
  w.prefill.hidden = w.decode.hidden = hidden;
  w.decode.core_dtype = precision.core_attention;
  return w;
}

double attention_allreduce_bytes(int64_t num_tokens, int64_t hidden_size, int32_t tp_gpus) {
  const double tp = static_cast<double>(tp_gpus);
  return 2.0 * (tp - 1) / tp * static_cast<double>(num_tokens * hidden_size) * 2.0;
}

OpWork rmsnorm_work(int64_t num_tokens, int64_t hidden_size, DType dtype) {
  const double bytes = static_cast<double>(num_tokens) * static_cast<double>(hidden_size) * 4.0;
  return make_work(OpKind::kRmsNorm, dtype, 4.0 * static_cast<double>(num_tokens * hidden_size),
                   bytes, num_tokens);
}

OpWork dense_ffn_work(int64_t num_tokens, int64_t hidden_size, int64_t intermediate_size,
                      int32_t tp, DType dtype) {
  const double w = 3.0 * static_cast<double>(hidden_size * intermediate_size);
  OpWork work = make_work(
      OpKind::kDenseFfn, dtype, static_cast<double>(num_tokens) * 2.0 * w / tp,
      w * bytes_per_param(dtype) / tp + static_cast<double>(num_tokens * hidden_size) * 4.0,
      num_tokens);
  work.hidden = hidden_size;
  work.ffn_intermediate = intermediate_size / std::max<int32_t>(tp, 1);
  return work;
}

OpWork router_work(const MoeSpec& moe, int64_t hidden_size, int64_t num_tokens, DType dtype) {
  return make_work(OpKind::kRouter, dtype,
                   static_cast<double>(num_tokens) * router_flops(moe, hidden_size),
                   static_cast<double>(hidden_size * moe.num_routed_experts) * 2.0 +
                       static_cast<double>(num_tokens * hidden_size) * 2.0,
                   num_tokens);
}

OpWork permute_work(int64_t num_tokens, int64_t top_k, int64_t hidden_size) {
  return make_work(OpKind::kPermute, DType::kBF16, 0,
                   static_cast<double>(num_tokens * top_k * hidden_size) * 4.0, num_tokens * top_k);
}

double expected_active_experts(double num_selections, int32_t num_experts,
                               double log1p_neg_inv_experts) {
  // exp() of anything below -745.14 is +0, and libm reaches that through its slow underflow
  // path: with many selections on few experts (prefill) every expert is active.
  const double x = num_selections * log1p_neg_inv_experts;
  if (x < -746.0) return static_cast<double>(num_experts);
  return static_cast<double>(num_experts) * (1.0 - std::exp(x));
}

double expected_active_experts(double num_selections, int32_t num_experts) {
  return expected_active_experts(num_selections, num_experts,
                                 std::log1p(-1.0 / static_cast<double>(num_experts)));
}

OpWork expert_ffn_work(const MoeSpec& moe, int64_t hidden_size, DType dtype, int64_t num_selections,
                       double active_experts) {
  const double sel = static_cast<double>(num_selections);
  const double weight_bytes = dtype_bytes(dtype, expert_params(moe, hidden_size));
  OpWork w = make_work(OpKind::kExpertFfn, dtype, sel * expert_flops_per_token(moe, hidden_size),
                       active_experts * weight_bytes + sel * static_cast<double>(hidden_size) * 4.0,
                       num_selections);
  w.num_experts = static_cast<int64_t>(std::ceil(active_experts));
  w.hidden = moe.latent_dim > 0 ? moe.latent_dim : hidden_size;
  w.ffn_intermediate = moe.expert_intermediate_size;
  return w;
}

OpWork shared_expert_work(const MoeSpec& moe, int64_t hidden_size, int64_t num_tokens,
                          DType dtype) {
  const double w = 3.0 * static_cast<double>(hidden_size * moe.shared_intermediate_size) *
                   static_cast<double>(moe.num_shared_experts);
  OpWork work = make_work(
      OpKind::kSharedExpert, dtype, static_cast<double>(num_tokens) * 2.0 * w,
      w * bytes_per_param(dtype) + static_cast<double>(num_tokens * hidden_size) * 4.0, num_tokens);
  work.hidden = hidden_size;
  work.ffn_intermediate = moe.shared_intermediate_size * moe.num_shared_experts;
  return work;
}

OpWork combine_work(int64_t num_tokens, int64_t top_k, bool has_shared, int64_t hidden_size) {
  const int64_t t = num_tokens;
  const double rows = static_cast<double>(t * top_k + t * (has_shared ? 2 : 1));
  return make_work(
      OpKind::kCombine, DType::kBF16, static_cast<double>(t * top_k * hidden_size) * 2.0,
      rows * static_cast<double>(hidden_size) * 2.0 + 4.0 * static_cast<double>(t * top_k), t);
}

OpWork lm_head_work(int64_t num_rows, int64_t hidden_size, int64_t vocab_size, int32_t tp,
                    DType dtype) {
  const double w = static_cast<double>(hidden_size * vocab_size);
  return make_work(OpKind::kLmHead, dtype, static_cast<double>(num_rows) * 2.0 * w / tp,
                   w * bytes_per_param(dtype) / tp, num_rows);
}

}  // namespace moesim::sim
