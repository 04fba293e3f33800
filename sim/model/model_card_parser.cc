// TOML model cards. The layer list is written compactly: num_layers, a comma-separated attention
// pattern repeated over the layers, and [ffn] with first_k_dense / moe_layer_freq choosing which
// layers are MoE (the rule of HuggingFace's DeepSeek-V3 code). Each attention kind used by the
// pattern has its own table; a table for an unused kind is an error, as is any unknown key.
#include "sim/model/model_card_parser.h"

#include <optional>

#include "sim/config/input_files.h"
#include "sim/config/toml_source.h"
#include "sim/model/hf_config.h"

namespace moesim::sim {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 24;     // bound for sizes, ranks and counts
constexpr int64_t kMaxTokens = int64_t{1} << 40;  // bound for vocabulary and context

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<AttentionKind> parse_pattern(TomlTable& t, std::string_view key) {
  const std::string text = t.get_string(key);
  std::vector<AttentionKind> kinds;
  size_t start = 0;
  for (size_t pos = 0; pos <= text.size(); ++pos) {
    if (pos < text.size() && text[pos] != ',') continue;
    const std::string item = trim(std::string_view(text).substr(start, pos - start));
    const std::string where = "element " + std::to_string(kinds.size() + 1);
    if (item == "mla") {
      kinds.push_back(AttentionKind::kMLA);
    } else if (item == "gqa") {
      kinds.push_back(AttentionKind::kGQA);
    } else if (item == "kda") {
      kinds.push_back(AttentionKind::kKDA);
    } else if (item.empty()) {
      t.fail(key, "bad layer pattern '" + text + "': " + where +
                      " is empty (write kinds separated by commas, e.g. \"kda,kda,kda,mla\")");
    } else {
      t.fail(key, "bad layer pattern '" + text + "': " + where + " '" + item +
                      "' is not a layer kind (valid: mla, gqa, kda)");
    }
    start = pos + 1;
  }
  return kinds;
}

MlaSpec parse_mla(TomlTable& t) {
  MlaSpec m;
  m.num_heads = t.get_int_in("num_heads", 1, kMaxDim);
  m.q_lora_rank = t.get_int_in_or("q_lora_rank", 0, kMaxDim, 0);
  m.kv_lora_rank = t.get_int_in("kv_lora_rank", 1, kMaxDim);
  m.qk_nope_head_dim = t.get_int_in("qk_nope_head_dim", 0, kMaxDim);
  m.qk_rope_head_dim = t.get_int_in("qk_rope_head_dim", 0, kMaxDim);
  if (m.qk_nope_head_dim + m.qk_rope_head_dim == 0) {
    t.fail("qk_rope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be positive");
  }
  m.v_head_dim = t.get_int_in("v_head_dim", 1, kMaxDim);
  t.finish();
  return m;
}

GqaSpec parse_gqa(TomlTable& t) {
  GqaSpec g;
  g.num_heads = t.get_int_in("num_heads", 1, kMaxDim);
  g.num_kv_heads = t.get_int_in("num_kv_heads", 1, g.num_heads);
  if (g.num_heads % g.num_kv_heads != 0) {
    t.fail("num_kv_heads", "num_kv_heads (" + std::to_string(g.num_kv_heads) +
                               ") must divide num_heads (" + std::to_string(g.num_heads) + ")");
  }
  g.head_dim = t.get_int_in("head_dim", 1, kMaxDim);
  g.qk_norm = t.get_bool_or("qk_norm", false);
  t.finish();
  return g;
}

KdaSpec parse_kda(TomlTable& t) {
  KdaSpec k;
  k.num_heads = t.get_int_in("num_heads", 1, kMaxDim);
  k.head_dim_k = t.get_int_in("head_dim_k", 1, kMaxDim);
  k.head_dim_v = t.get_int_in("head_dim_v", 1, kMaxDim);
  k.short_conv_kernel = t.get_int_in_or("short_conv_kernel", 1, 64, 4);
  k.gate_lora_rank = t.get_int_in_or("gate_lora_rank", 1, kMaxDim, k.head_dim_k);
  k.output_gate = t.get_bool_or("output_gate", true);
  t.finish();
  return k;
}

MoeSpec parse_moe(TomlTable& t, int64_t hidden_size) {
  MoeSpec m;
  m.num_routed_experts = t.get_int_in("num_routed_experts", 1, kMaxDim);
  m.top_k = t.get_int_in("top_k", 1, kMaxDim);
  if (m.top_k > m.num_routed_experts) {
    t.fail("top_k", "top_k (" + std::to_string(m.top_k) + ") exceeds num_routed_experts (" +
                        std::to_string(m.num_routed_experts) + ")");
  }
  m.num_shared_experts = t.get_int_in_or("num_shared_experts", 0, kMaxDim, 0);
  m.expert_intermediate_size = t.get_int_in("expert_intermediate_size", 1, kMaxDim);
  if (m.num_shared_experts > 0) {
    m.shared_intermediate_size =
        t.get_int_in_or("shared_intermediate_size", 1, kMaxDim, m.expert_intermediate_size);
  } else if (t.has("shared_intermediate_size")) {
    t.fail("shared_intermediate_size", "given but num_shared_experts is 0");
  }
  m.num_expert_groups = t.get_int_in_or("num_expert_groups", 1, m.num_routed_experts, 1);
  if (m.num_routed_experts % m.num_expert_groups != 0) {
    t.fail("num_expert_groups", "num_expert_groups (" + std::to_string(m.num_expert_groups) +
                                    ") must divide num_routed_experts (" +
                                    std::to_string(m.num_routed_experts) + ")");
  }
  m.topk_groups = t.get_int_in_or("topk_groups", 1, m.num_expert_groups, 1);
  const int64_t selectable = m.topk_groups * (m.num_routed_experts / m.num_expert_groups);
  if (m.top_k > selectable) {
    t.fail("top_k", "top_k (" + std::to_string(m.top_k) + ") exceeds the " +
                        std::to_string(selectable) + " experts in the topk_groups selected groups");
  }
  m.scoring = t.get_enum_or("scoring", {"softmax", "sigmoid"}, "softmax") == "sigmoid"
                  ? ScoringFunc::kSigmoid
                  : ScoringFunc::kSoftmax;
  m.latent_dim = t.get_int_in_or("latent_dim", 0, hidden_size, 0);
  t.finish();
  return m;
}

DType parse_dtype(TomlTable& t, std::string_view key, DType dflt) {
  const std::string name =
      t.get_enum_or(key, {"fp32", "bf16", "fp16", "fp8", "mxfp8", "mxfp4", "nvfp4"},
                    std::string(dtype_name(dflt)));
  return *dtype_from_name(name);
}

Precision parse_precision(TomlTable& t) {
  Precision p;
  p.attention = parse_dtype(t, "attention", p.attention);
  p.core_attention = parse_dtype(t, "core_attention", p.core_attention);
  p.dense_ffn = parse_dtype(t, "dense_ffn", p.dense_ffn);
  p.routed_experts = parse_dtype(t, "routed_experts", p.routed_experts);
  p.shared_experts = parse_dtype(t, "shared_experts", p.shared_experts);
  if (t.has("router")) p.router = parse_dtype(t, "router", p.shared_experts);
  p.embeddings = parse_dtype(t, "embeddings", p.embeddings);
  p.kv_cache = parse_dtype(t, "kv_cache", p.kv_cache);
  p.recurrent_state = parse_dtype(t, "recurrent_state", p.recurrent_state);
  t.finish();
  return p;
}

bool uses(const std::vector<AttentionKind>& pattern, AttentionKind kind) {
  for (AttentionKind k : pattern) {
    if (k == kind) return true;
  }
  return false;
}

}  // namespace

ModelCard parse_model_card(TomlTable& root) {
  ModelCard card;
  card.source_file = root.file();
  card.name = root.get_string("name");
  if (card.name.empty()) root.fail("name", "must not be empty");
  card.hidden_size = root.get_int_in("hidden_size", 1, kMaxDim);
  card.vocab_size = root.get_int_in("vocab_size", 1, kMaxTokens);
  card.max_context_tokens = root.get_int_in("max_context_tokens", 1, kMaxTokens);
  card.tie_word_embeddings = root.get_bool_or("tie_word_embeddings", false);
  card.num_mtp_layers = root.get_int_in_or("num_mtp_layers", 0, 64, 0);
  const int64_t num_layers = root.get_int_in("num_layers", 1, 4096);
  const std::vector<AttentionKind> pattern = parse_pattern(root, "attention_pattern");

  // Attention tables: one per kind in the pattern, none for unused kinds.
  TomlTable attn = root.get_table("attention");
  AttentionSpec specs[3];
  const std::pair<AttentionKind, const char*> kinds[] = {
      {AttentionKind::kMLA, "mla"}, {AttentionKind::kGQA, "gqa"}, {AttentionKind::kKDA, "kda"}};
  for (const auto& [kind, key] : kinds) {
    if (uses(pattern, kind) && !attn.has(key)) {
      attn.fail(key, "missing required table (attention_pattern uses it)");
    }
  }
  for (const auto& [kind, key] : kinds) {
    std::optional<TomlTable> t = attn.find_table(key);
    if (!t) continue;
    if (!uses(pattern, kind)) {
      attn.fail(key, std::string("table given but attention_pattern has no '") + key + "' layer");
    }
    AttentionSpec& s = specs[static_cast<int>(kind)];
    s.kind = kind;
    if (kind == AttentionKind::kMLA) s.mla = parse_mla(*t);
    if (kind == AttentionKind::kGQA) s.gqa = parse_gqa(*t);
    if (kind == AttentionKind::kKDA) s.kda = parse_kda(*t);
  }
  attn.finish();

  // FFNs: MoE from layer first_k_dense on, every moe_layer_freq-th layer; the others dense.
  TomlTable ffn = root.get_table("ffn");
  std::optional<TomlTable> moe_table = ffn.find_table("moe");
  int64_t first_k_dense = 0, moe_layer_freq = 1;
  MoeSpec moe;
  if (moe_table) {
    first_k_dense = ffn.get_int_in_or("first_k_dense", 0, num_layers, 0);
    moe_layer_freq = ffn.get_int_in_or("moe_layer_freq", 1, num_layers, 1);
    moe = parse_moe(*moe_table, card.hidden_size);
  } else {
    for (const char* key : {"first_k_dense", "moe_layer_freq"}) {
      if (ffn.has(key)) ffn.fail(key, "needs an [ffn.moe] table (without it every layer is dense)");
    }
  }
  int64_t num_dense = 0;
  for (int64_t i = 0; i < num_layers; ++i) {
    const bool is_moe = moe_table && i >= first_k_dense && i % moe_layer_freq == 0;
    num_dense += is_moe ? 0 : 1;
  }
  int64_t dense_intermediate = 0;
  if (num_dense > 0) {
    dense_intermediate = ffn.get_int_in("dense_intermediate_size", 1, kMaxDim);
  } else if (ffn.has("dense_intermediate_size")) {
    ffn.fail("dense_intermediate_size", "given but no layer is dense");
  }
  ffn.finish();

  card.layers.resize(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) {
    LayerSpec& l = card.layers[static_cast<size_t>(i)];
    l.attention = specs[static_cast<int>(pattern[static_cast<size_t>(i) % pattern.size()])];
    l.ffn.is_moe = moe_table && i >= first_k_dense && i % moe_layer_freq == 0;
    if (l.ffn.is_moe) {
      l.ffn.moe = moe;
    } else {
      l.ffn.intermediate_size = dense_intermediate;
    }
  }

  if (std::optional<TomlTable> prec = root.find_table("precision")) {
    card.precision = parse_precision(*prec);
  }
  root.finish();
  validate_model_card(card);
  return card;
}

ModelCard load_model_card(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    return parse_hf_config(read_input_text(path, InputKind::kConfig), path);
  }
  TomlDocument doc = TomlDocument::load_file(path);
  TomlTable root = doc.root();
  return parse_model_card(root);
}

}  // namespace moesim::sim
