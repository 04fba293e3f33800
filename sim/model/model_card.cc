// Derived quantities of a model card. Formulas are written once here, per layer kind; the
// conventions are in the header and docs/models.md.
#include "sim/model/model_card.h"

#include <array>

#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

double d(int64_t v) { return static_cast<double>(v); }

}  // namespace

double attention_projection_params(const AttentionSpec& a, int64_t hidden_size) {
  const double h = d(hidden_size);
  switch (a.kind) {
    case AttentionKind::kMLA: {
      const MlaSpec& m = a.mla;
      const double qk_dim = d(m.num_heads) * d(m.qk_nope_head_dim + m.qk_rope_head_dim);
      const double q =
          m.q_lora_rank > 0 ? h * d(m.q_lora_rank) + d(m.q_lora_rank) * qk_dim : h * qk_dim;
      const double kv_down = h * d(m.kv_lora_rank + m.qk_rope_head_dim);
      const double kv_up =
          d(m.kv_lora_rank) * d(m.num_heads) * d(m.qk_nope_head_dim + m.v_head_dim);
      const double o = d(m.num_heads) * d(m.v_head_dim) * h;
      return q + kv_down + kv_up + o;
    }
    case AttentionKind::kGQA: {
      const GqaSpec& g = a.gqa;
      return h * d(g.num_heads) * d(g.head_dim) * 2.0 + h * d(g.num_kv_heads) * d(g.head_dim) * 2.0;
    }
    case AttentionKind::kKDA: {
      const KdaSpec& k = a.kda;
      const double qk = d(k.num_heads) * d(k.head_dim_k);
      const double v = d(k.num_heads) * d(k.head_dim_v);
      const double r = d(k.gate_lora_rank);
      double p = h * (2.0 * qk + v);                 // q, k, v projections
      p += d(k.short_conv_kernel) * (2.0 * qk + v);  // depthwise short convolutions
      p += h * r + r * qk;                           // forget gate (low rank)
      p += h * d(k.num_heads);                       // beta
      if (k.output_gate) p += h * r + r * v;         // output gate (low rank)
      p += v * h;                                    // output projection
      return p;
    }
  }
  return 0;
}

namespace {

// Norm weights and per-head scalars inside the attention block.
double attention_other_params(const AttentionSpec& a) {
  switch (a.kind) {
    case AttentionKind::kMLA:
      return d(a.mla.q_lora_rank) + d(a.mla.kv_lora_rank);  // latent RMSNorms
    case AttentionKind::kGQA:
      return a.gqa.qk_norm ? 2.0 * d(a.gqa.head_dim) : 0.0;
    case AttentionKind::kKDA:
      // decay (A_log) per head, dt bias per key channel, output norm per value channel
      return d(a.kda.num_heads) + d(a.kda.num_heads) * d(a.kda.head_dim_k) + d(a.kda.head_dim_v);
  }
  return 0;
}

}  // namespace

double gated_ffn_params(int64_t in_dim, int64_t intermediate) {
  return 3.0 * d(in_dim) * d(intermediate);
}

namespace {

double router_params(const MoeSpec& m, int64_t hidden_size) {
  double p = d(hidden_size) * d(m.num_routed_experts);
  if (m.scoring == ScoringFunc::kSigmoid) p += d(m.num_routed_experts);  // correction bias
  if (m.latent_dim > 0) p += 2.0 * d(hidden_size) * d(m.latent_dim);     // down + up projection
  return p;
}

}  // namespace

double shared_expert_params(const MoeSpec& m, int64_t hidden_size) {
  return d(m.num_shared_experts) * gated_ffn_params(hidden_size, m.shared_intermediate_size);
}

namespace {

[[noreturn]] void invalid(const ModelCard& card, const std::string& key, const std::string& why) {
  throw ConfigError(card.source_file, 0, 0, key, why);
}

void require_positive(const ModelCard& card, const std::string& key, int64_t v) {
  if (v <= 0) invalid(card, key, "must be positive (got " + std::to_string(v) + ")");
}

void require_non_negative(const ModelCard& card, const std::string& key, int64_t v) {
  if (v < 0) invalid(card, key, "must be >= 0 (got " + std::to_string(v) + ")");
}

void validate_attention(const ModelCard& card, const std::string& p, const AttentionSpec& a) {
  switch (a.kind) {
    case AttentionKind::kMLA:
      require_positive(card, p + ".mla.num_heads", a.mla.num_heads);
      require_non_negative(card, p + ".mla.q_lora_rank", a.mla.q_lora_rank);
      require_positive(card, p + ".mla.kv_lora_rank", a.mla.kv_lora_rank);
      require_non_negative(card, p + ".mla.qk_nope_head_dim", a.mla.qk_nope_head_dim);
      require_non_negative(card, p + ".mla.qk_rope_head_dim", a.mla.qk_rope_head_dim);
      require_positive(card, p + ".mla.qk_nope_head_dim + qk_rope_head_dim",
                       a.mla.qk_nope_head_dim + a.mla.qk_rope_head_dim);
      require_positive(card, p + ".mla.v_head_dim", a.mla.v_head_dim);
      return;
    case AttentionKind::kGQA:
      require_positive(card, p + ".gqa.num_heads", a.gqa.num_heads);
      require_positive(card, p + ".gqa.num_kv_heads", a.gqa.num_kv_heads);
      require_positive(card, p + ".gqa.head_dim", a.gqa.head_dim);
      if (a.gqa.num_heads % a.gqa.num_kv_heads != 0) {
        invalid(card, p + ".gqa.num_kv_heads",
                "num_kv_heads (" + std::to_string(a.gqa.num_kv_heads) +
                    ") must divide num_heads (" + std::to_string(a.gqa.num_heads) + ")");
      }
      return;
    case AttentionKind::kKDA:
      require_positive(card, p + ".kda.num_heads", a.kda.num_heads);
      require_positive(card, p + ".kda.head_dim_k", a.kda.head_dim_k);
      require_positive(card, p + ".kda.head_dim_v", a.kda.head_dim_v);
      require_positive(card, p + ".kda.short_conv_kernel", a.kda.short_conv_kernel);
      require_positive(card, p + ".kda.gate_lora_rank", a.kda.gate_lora_rank);
      return;
  }
}

}  // namespace

double bits_per_element(DType dtype) {
  switch (dtype) {
    case DType::kFP32:
      return 32.0;
    case DType::kBF16:
      return 16.0;
    case DType::kFP16:
      return 16.0;
    case DType::kFP8:
      return 8.0;
    case DType::kMXFP8:
      return 8.0 + 8.0 / 32.0;
    case DType::kMXFP4:
      return 4.0 + 8.0 / 32.0;
    case DType::kNVFP4:
      return 4.0 + 8.0 / 16.0;
  }
  return 0;
}

namespace {
constexpr std::array<std::pair<DType, std::string_view>, 7> kDTypeNames = {{
    {DType::kFP32, "fp32"},
    {DType::kBF16, "bf16"},
    {DType::kFP16, "fp16"},
    {DType::kFP8, "fp8"},
    {DType::kMXFP8, "mxfp8"},
    {DType::kMXFP4, "mxfp4"},
    {DType::kNVFP4, "nvfp4"},
}};
}  // namespace

std::string_view dtype_name(DType dtype) {
  for (const auto& [t, n] : kDTypeNames) {
    if (t == dtype) return n;
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& [t, n] : kDTypeNames) {
    if (n == name) return t;
  }
  return std::nullopt;
}

double dtype_bytes(DType dtype, double num_elements) {
  return num_elements * bits_per_element(dtype) / 8.0;
}

std::string_view attention_kind_name(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kMLA:
      return "mla";
    case AttentionKind::kGQA:
      return "gqa";
    case AttentionKind::kKDA:
      return "kda";
  }
  return "?";
}

std::string_view scoring_func_name(ScoringFunc f) {
  return f == ScoringFunc::kSoftmax ? "softmax" : "sigmoid";
}

std::string_view tensor_group_name(TensorGroup g) {
  switch (g) {
    case TensorGroup::kAttention:
      return "attention";
    case TensorGroup::kDenseFfn:
      return "dense_ffn";
    case TensorGroup::kRoutedExperts:
      return "routed_experts";
    case TensorGroup::kSharedExperts:
      return "shared_experts";
    case TensorGroup::kRouter:
      return "router";
    case TensorGroup::kEmbeddings:
      return "embeddings";
  }
  return "?";
}

DType tensor_group_dtype(const Precision& p, TensorGroup g) {
  switch (g) {
    case TensorGroup::kAttention:
      return p.attention;
    case TensorGroup::kDenseFfn:
      return p.dense_ffn;
    case TensorGroup::kRoutedExperts:
      return p.routed_experts;
    case TensorGroup::kSharedExperts:
      return p.shared_experts;
    case TensorGroup::kRouter:
      return p.router.value_or(p.shared_experts);
    case TensorGroup::kEmbeddings:
      return p.embeddings;
  }
  return p.attention;
}

double weight_bits_per_element(const Precision& p, TensorGroup g) {
  const double stored = p.storage[static_cast<size_t>(g)].bits_per_element;
  return stored > 0 ? stored : bits_per_element(tensor_group_dtype(p, g));
}

void validate_model_card(const ModelCard& card) {
  if (card.name.empty()) invalid(card, "name", "must not be empty");
  require_positive(card, "hidden_size", card.hidden_size);
  require_positive(card, "vocab_size", card.vocab_size);
  require_positive(card, "max_context_tokens", card.max_context_tokens);
  require_non_negative(card, "num_mtp_layers", card.num_mtp_layers);
  if (card.layers.empty()) invalid(card, "layers", "a model needs at least one layer");
  for (size_t i = 0; i < card.layers.size(); ++i) {
    const std::string p = "layers[" + std::to_string(i) + "]";
    validate_attention(card, p + ".attention", card.layers[i].attention);
    const FfnSpec& f = card.layers[i].ffn;
    if (!f.is_moe) {
      require_positive(card, p + ".ffn.intermediate_size", f.intermediate_size);
      continue;
    }
    const MoeSpec& m = f.moe;
    const std::string q = p + ".ffn.moe.";
    require_positive(card, q + "num_routed_experts", m.num_routed_experts);
    require_positive(card, q + "top_k", m.top_k);
    require_non_negative(card, q + "num_shared_experts", m.num_shared_experts);
    require_positive(card, q + "expert_intermediate_size", m.expert_intermediate_size);
    if (m.num_shared_experts > 0) {
      require_positive(card, q + "shared_intermediate_size", m.shared_intermediate_size);
    }
    require_positive(card, q + "num_expert_groups", m.num_expert_groups);
    require_positive(card, q + "topk_groups", m.topk_groups);
    require_non_negative(card, q + "latent_dim", m.latent_dim);
    if (m.top_k > m.num_routed_experts) {
      invalid(card, q + "top_k",
              "top_k (" + std::to_string(m.top_k) + ") exceeds num_routed_experts (" +
                  std::to_string(m.num_routed_experts) + ")");
    }
    if (m.num_routed_experts % m.num_expert_groups != 0) {
      invalid(card, q + "num_expert_groups",
              "num_expert_groups (" + std::to_string(m.num_expert_groups) +
                  ") must divide num_routed_experts (" + std::to_string(m.num_routed_experts) +
                  ")");
    }
    if (m.topk_groups > m.num_expert_groups) {
      invalid(card, q + "topk_groups",
              "topk_groups (" + std::to_string(m.topk_groups) + ") exceeds num_expert_groups (" +
                  std::to_string(m.num_expert_groups) + ")");
    }
    const int64_t selectable = m.topk_groups * (m.num_routed_experts / m.num_expert_groups);
    if (m.top_k > selectable) {
      invalid(card, q + "top_k",
              "top_k (" + std::to_string(m.top_k) + ") exceeds the " + std::to_string(selectable) +
                  " experts in the topk_groups selected groups");
    }
    if (m.latent_dim > card.hidden_size) {
      invalid(card, q + "latent_dim",
              "latent_dim (" + std::to_string(m.latent_dim) + ") exceeds hidden_size (" +
                  std::to_string(card.hidden_size) + ")");
    }
  }
}

double ParamCounts::total() const {
  return embedding + lm_head + attention + dense_ffn + router + routed_experts + shared_experts +
         norms;
}

double ParamCounts::group(TensorGroup g) const {
  switch (g) {
    case TensorGroup::kAttention:
      return attention + norms;
    case TensorGroup::kDenseFfn:
      return dense_ffn;
    case TensorGroup::kRoutedExperts:
      return routed_experts;
    case TensorGroup::kSharedExperts:
      return shared_experts;
    case TensorGroup::kRouter:
      return router;
    case TensorGroup::kEmbeddings:
      return embedding + lm_head;
  }
  return 0;
}

double attention_params(const AttentionSpec& a, int64_t hidden_size) {
  return attention_projection_params(a, hidden_size) + attention_other_params(a);
}

double expert_params(const MoeSpec& m, int64_t hidden_size) {
  return gated_ffn_params(m.latent_dim > 0 ? m.latent_dim : hidden_size,
                          m.expert_intermediate_size);
}

double expert_weight_bytes(const ModelCard& card, const MoeSpec& m) {
  return expert_params(m, card.hidden_size) *
         weight_bits_per_element(card.precision, TensorGroup::kRoutedExperts) / 8.0;
}

double expert_activation_bytes(const MoeSpec& m, int64_t hidden_size, DType activation_dtype) {
  return dtype_bytes(activation_dtype, d(m.latent_dim > 0 ? m.latent_dim : hidden_size));
}

namespace {

ParamCounts count_params(const ModelCard& card, bool active) {
  ParamCounts c;
  const double h = d(card.hidden_size);
  c.embedding = d(card.vocab_size) * h;
  c.lm_head = card.tie_word_embeddings ? 0.0 : d(card.vocab_size) * h;
  c.norms = (2.0 * d(static_cast<int64_t>(card.layers.size())) + 1.0) * h;
  for (const LayerSpec& layer : card.layers) {
    c.attention += attention_params(layer.attention, card.hidden_size);
    if (!layer.ffn.is_moe) {
      c.dense_ffn += gated_ffn_params(card.hidden_size, layer.ffn.intermediate_size);
      continue;
    }
    const MoeSpec& m = layer.ffn.moe;
    c.router += router_params(m, card.hidden_size);
    c.shared_experts += shared_expert_params(m, card.hidden_size);
    c.routed_experts +=
        d(active ? m.top_k : m.num_routed_experts) * expert_params(m, card.hidden_size);
  }
  return c;
}

}  // namespace

ParamCounts total_param_counts(const ModelCard& card) { return count_params(card, false); }
ParamCounts active_param_counts(const ModelCard& card) { return count_params(card, true); }
double total_params(const ModelCard& card) { return total_param_counts(card).total(); }
double active_params(const ModelCard& card) { return active_param_counts(card).total(); }
double active_params_excluding_input_embedding(const ModelCard& card) {
  ParamCounts c = active_param_counts(card);
  return c.total() - c.embedding;
}

double mtp_params(const ModelCard& card) {
  if (card.num_mtp_layers == 0 || card.layers.empty()) return 0;
  ModelCard last = card;
  last.layers = {card.layers.back()};
  last.tie_word_embeddings = true;
  ParamCounts c = total_param_counts(last);
  const double h = d(card.hidden_size);
  // One layer (its two norms included; no embedding, head or final norm of its own) plus the
  // embedding and hidden-state norms, the 2h -> h projection and the shared head's norm.
  const double per_module = c.total() - c.embedding - h + 2.0 * h + 2.0 * h * h + h;
  return d(card.num_mtp_layers) * per_module;
}

double weight_bytes(const ModelCard& card, TensorGroup g) {
  return total_param_counts(card).group(g) * weight_bits_per_element(card.precision, g) / 8.0;
}

double total_weight_bytes(const ModelCard& card) {
  double sum = 0;
  for (int g = 0; g < kNumTensorGroups; ++g) sum += weight_bytes(card, static_cast<TensorGroup>(g));
  return sum;
}

double kv_bytes_per_token(const AttentionSpec& a, DType kv_dtype) {
  switch (a.kind) {
    case AttentionKind::kMLA:
      return dtype_bytes(kv_dtype, d(a.mla.kv_lora_rank + a.mla.qk_rope_head_dim));
    case AttentionKind::kGQA:
      return dtype_bytes(kv_dtype, 2.0 * d(a.gqa.num_kv_heads) * d(a.gqa.head_dim));
    case AttentionKind::kKDA:
      return 0;
  }
  return 0;
}

double kv_bytes_per_token(const ModelCard& card) {
  double sum = 0;
  for (const LayerSpec& l : card.layers)
    sum += kv_bytes_per_token(l.attention, card.precision.kv_cache);
  return sum;
}

double recurrent_state_bytes_per_sequence(const AttentionSpec& a, DType state_dtype) {
  if (a.kind != AttentionKind::kKDA) return 0;
  const KdaSpec& k = a.kda;
  const double state = d(k.num_heads) * d(k.head_dim_k) * d(k.head_dim_v);
  const double conv = d(k.short_conv_kernel - 1) *
                      (2.0 * d(k.num_heads) * d(k.head_dim_k) + d(k.num_heads) * d(k.head_dim_v));
  return dtype_bytes(state_dtype, state + conv);
}

double recurrent_state_bytes_per_sequence(const ModelCard& card) {
  double sum = 0;
  for (const LayerSpec& l : card.layers) {
    sum += recurrent_state_bytes_per_sequence(l.attention, card.precision.recurrent_state);
  }
  return sum;
}

int64_t num_layers_of_kind(const ModelCard& card, AttentionKind kind) {
  int64_t n = 0;
  for (const LayerSpec& l : card.layers) n += l.attention.kind == kind ? 1 : 0;
  return n;
}

int64_t num_moe_layers(const ModelCard& card) {
  int64_t n = 0;
  for (const LayerSpec& l : card.layers) n += l.ffn.is_moe ? 1 : 0;
  return n;
}

}  // namespace moesim::sim
