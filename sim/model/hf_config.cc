// HuggingFace config.json import. A small reader records every key asked for; keys neither
// asked for nor on the ignore list of known, architecture-neutral keys are errors. Errors carry
// the line:col of the key's first occurrence in the text (JSON has no node positions).
#include "sim/model/hf_config.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "sim/config/config_error.h"
#include "sim/core/json_depth.h"
#include "sim/core/json_number.h"

namespace moesim::sim {
namespace {

using nlohmann::json;

// Known keys that do not change sizes, bytes or FLOPs (documented in docs/models.md).
const std::set<std::string, std::less<>> kIgnoredKeys = {
    "architectures",        "attention_bias",    "attention_dropout",     "auto_map",
    "aux_loss_alpha",       "bos_token_id",      "eos_token_id",          "ep_size",
    "hidden_act",           "initializer_range", "max_window_layers",     "norm_topk_prob",
    "output_router_logits", "pad_token_id",      "pretraining_tp",        "rms_norm_eps",
    "rope_scaling",         "rope_theta",        "routed_scaling_factor", "router_aux_loss_coef",
    "router_jitter_noise",  "seq_aux",           "sliding_window",        "topk_method",
    "transformers_version", "use_cache",         "use_sliding_window",
};

void line_col(std::string_view text, size_t offset, int* line, int* col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++*line;
      *col = 1;
    } else {
      ++*col;
    }
  }
}

class JsonReader {
 public:
  JsonReader(const json& obj, std::string_view text, std::string file)
      : obj_(obj), text_(text), file_(std::move(file)) {}

  [[noreturn]] void fail(std::string_view key, const std::string& reason) const {
    int line = 0, col = 0;
    const size_t pos = text_.find("\"" + std::string(key) + "\"");
    if (pos != std::string_view::npos) line_col(text_, pos, &line, &col);
    throw ConfigError(file_, line, col, std::string(key), reason);
  }

  bool has(std::string_view key) {
    asked_.emplace(key);
    auto it = obj_.find(key);
    return it != obj_.end() && !it->is_null();
  }

  // Integer in [lo, hi]; JSON null reads as `null_value` when that is given.
  int64_t get_int(std::string_view key, int64_t lo, int64_t hi,
                  std::optional<int64_t> dflt = std::nullopt) {
    asked_.emplace(key);
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) {
      if (dflt) return *dflt;
      fail(key, "missing required key (integer)");
    }
    if (!it->is_number_integer()) fail(key, "expected an integer, got " + type_of(*it));
    const std::optional<int64_t> checked = json_integer<int64_t>(*it);
    if (!checked)
      fail(key, "value " + it->dump() + " is out of range [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
    const int64_t v = *checked;
    if (v < lo || v > hi) {
      fail(key, "value " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
    }
    return v;
  }

  std::string get_string(std::string_view key, std::optional<std::string> dflt = std::nullopt) {
    asked_.emplace(key);
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) {
      if (dflt) return *dflt;
      fail(key, "missing required key (string)");
    }
    if (!it->is_string()) fail(key, "expected a string, got " + type_of(*it));
    return it->get<std::string>();
  }

  bool get_bool(std::string_view key, bool dflt) {
    asked_.emplace(key);
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return dflt;
    if (!it->is_boolean()) fail(key, "expected a boolean, got " + type_of(*it));
    return it->get<bool>();
  }

  const json* get_object(std::string_view key) {
    asked_.emplace(key);
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    if (!it->is_object()) fail(key, "expected an object, got " + type_of(*it));
    return &*it;
  }

  std::vector<int64_t> get_int_array(std::string_view key) {
    asked_.emplace(key);
    auto it = obj_.find(key);
    std::vector<int64_t> out;
    if (it == obj_.end() || it->is_null()) return out;
    if (!it->is_array()) fail(key, "expected an array of integers, got " + type_of(*it));
    for (const json& e : *it) {
      if (!e.is_number_integer()) fail(key, "expected an array of integers");
      const std::optional<int64_t> v = json_integer<int64_t>(e);
      if (!v) fail(key, "expected an array of integers in int64's range");
      out.push_back(*v);
    }
    return out;
  }

  // Marks `key` as known without reading it.
  void ignore(std::string_view key) { asked_.emplace(key); }

  // Raises an error for the first key (in sorted order) neither asked for nor ignored.
  void finish() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      const std::string& key = it.key();
      if (asked_.count(key) || kIgnoredKeys.count(key)) continue;
      std::string best;
      int best_d = std::numeric_limits<int>::max();
      for (const auto& a : asked_) {
        const int dist = edit_distance(key, a);
        if (dist < best_d) {
          best_d = dist;
          best = a;
        }
      }
      std::string reason = "unknown key '" + key + "' (not read and not on the ignore list";
      if (!best.empty() && best_d <= std::max<int>(2, static_cast<int>(key.size()) / 3)) {
        reason += "; did you mean '" + best + "'?";
      }
      fail(key, reason + ")");
    }
  }

 private:
  static std::string type_of(const json& v) {
    if (v.is_number_integer()) return "integer";
    if (v.is_number()) return "float";
    return v.type_name();
  }

  const json& obj_;
  std::string_view text_;
  std::string file_;
  std::set<std::string, std::less<>> asked_;
};

constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxTokens = int64_t{1} << 40;

// Weight precision from torch_dtype and quantization_config.
Precision read_precision(JsonReader& r) {
  Precision p;
  const std::string torch_dtype = r.get_string("torch_dtype", "bfloat16");
  DType base;
  if (torch_dtype == "bfloat16") {
    base = DType::kBF16;
  } else if (torch_dtype == "float16") {
    base = DType::kFP16;
  } else if (torch_dtype == "float32") {
    base = DType::kFP32;
  } else {
    r.fail("torch_dtype",
           "unknown value '" + torch_dtype + "' (valid: bfloat16, float16, float32)");
  }
  p.attention = p.dense_ffn = p.routed_experts = p.shared_experts = p.embeddings = base;
  p.kv_cache = base;
  if (const json* q = r.get_object("quantization_config")) {
    auto it = q->find("quant_method");
    const std::string method = it != q->end() && it->is_string() ? it->get<std::string>() : "";
    if (method == "fp8") {
      // DeepSeek-V3 style block FP8: every linear layer except embedding and head.
      p.attention = p.dense_ffn = p.routed_experts = p.shared_experts = DType::kFP8;
    } else if (method == "mxfp4") {
      p.routed_experts = DType::kMXFP4;
    } else {
      r.fail("quantization_config",
             "unsupported quant_method '" + method + "' (valid: fp8, mxfp4)");
    }
  }
  return p;
}

}  // namespace

ModelCard parse_hf_config(std::string_view json_text, const std::string& file,
                          const std::string& name) {
  json root;
  try {
    root = parse_json(std::string(json_text));
  } catch (const JsonDepthError& e) {
    throw ConfigError(file, 0, 0, "", e.what());
  } catch (const json::out_of_range& e) {
    // A number beyond double's range (1e400), refused while parsing (sim/core/json_number.h).
    throw ConfigError(file, 0, 0, "", "JSON number out of range: " + json_exception_reason(e));
  } catch (const json::parse_error& e) {
    int line = 0, col = 0;
    line_col(json_text, e.byte > 0 ? e.byte - 1 : 0, &line, &col);
    std::string what = e.what();
    // nlohmann's text: "[json.exception.parse_error.101] parse error at line L, column C: WHY"
    const size_t colon = what.find(": ");
    throw ConfigError(
        file, line, col, "",
        "JSON syntax error: " + (colon == std::string::npos ? what : what.substr(colon + 2)));
  }
  if (!root.is_object()) throw ConfigError(file, 1, 1, "", "expected a JSON object at top level");

  JsonReader r(root, json_text, file);
  const std::string model_type = r.get_string("model_type");
  const bool deepseek =
      model_type == "deepseek_v3" || model_type == "deepseek_v2" || model_type == "kimi_k2";
  const bool qwen3_moe = model_type == "qwen3_moe";
  const bool mixtral = model_type == "mixtral";
  if (!deepseek && !qwen3_moe && !mixtral) {
    r.fail("model_type", "unsupported model_type '" + model_type +
                             "' (valid: deepseek_v2, deepseek_v3, kimi_k2, qwen3_moe, mixtral)");
  }

  ModelCard card;
  card.source_file = file;
  card.name = name.empty() ? model_type : name;
  card.hidden_size = r.get_int("hidden_size", 1, kMaxDim);
  card.vocab_size = r.get_int("vocab_size", 1, kMaxTokens);
  card.max_context_tokens = r.get_int("max_position_embeddings", 1, kMaxTokens);
  card.tie_word_embeddings = r.get_bool("tie_word_embeddings", false);
  const int64_t num_layers = r.get_int("num_hidden_layers", 1, 4096);
  const int64_t num_heads = r.get_int("num_attention_heads", 1, kMaxDim);

  AttentionSpec attn;
  std::vector<bool> is_moe(static_cast<size_t>(num_layers), false);
  MoeSpec moe;
  int64_t dense_intermediate = 0;
  moe.top_k = r.get_int("num_experts_per_tok", 1, kMaxDim);

  if (deepseek) {
    attn.kind = AttentionKind::kMLA;
    attn.mla.num_heads = num_heads;
    attn.mla.q_lora_rank = r.get_int("q_lora_rank", 0, kMaxDim, 0);  // null: no query LoRA
    attn.mla.kv_lora_rank = r.get_int("kv_lora_rank", 1, kMaxDim);
    attn.mla.qk_nope_head_dim = r.get_int("qk_nope_head_dim", 0, kMaxDim);
    attn.mla.qk_rope_head_dim = r.get_int("qk_rope_head_dim", 0, kMaxDim);
    attn.mla.v_head_dim = r.get_int("v_head_dim", 1, kMaxDim);
    r.ignore("num_key_value_heads");  // MLA caches one latent per token whatever this says
    moe.num_routed_experts = r.get_int("n_routed_experts", 1, kMaxDim);
    moe.num_shared_experts = r.get_int("n_shared_experts", 0, kMaxDim, 0);
    moe.expert_intermediate_size = r.get_int("moe_intermediate_size", 1, kMaxDim);
    // DeepSeek's shared experts are one FFN of n_shared_experts * moe_intermediate_size; that
    // equals n_shared_experts experts of moe_intermediate_size each in parameters and FLOPs.
    moe.shared_intermediate_size = moe.expert_intermediate_size;
    moe.num_expert_groups = r.get_int("n_group", 1, kMaxDim, 1);
    moe.topk_groups = r.get_int("topk_group", 1, kMaxDim, 1);
    const std::string scoring = r.get_string("scoring_func", "softmax");
    if (scoring != "softmax" && scoring != "sigmoid") {
      r.fail("scoring_func", "unknown value '" + scoring + "' (valid: softmax, sigmoid)");
    }
    moe.scoring = scoring == "sigmoid" ? ScoringFunc::kSigmoid : ScoringFunc::kSoftmax;
    card.num_mtp_layers = r.get_int("num_nextn_predict_layers", 0, 64, 0);
    const int64_t first_k_dense = r.get_int("first_k_dense_replace", 0, num_layers, 0);
    const int64_t freq = r.get_int("moe_layer_freq", 1, num_layers, 1);
    for (int64_t i = 0; i < num_layers; ++i) {
      is_moe[static_cast<size_t>(i)] = i >= first_k_dense && i % freq == 0;
    }
    if (first_k_dense > 0 || freq > 1) {
      dense_intermediate = r.get_int("intermediate_size", 1, kMaxDim);
    } else {
      r.ignore("intermediate_size");
    }
  } else {
    attn.kind = AttentionKind::kGQA;
    attn.gqa.num_heads = num_heads;
    attn.gqa.num_kv_heads = r.get_int("num_key_value_heads", 1, num_heads, num_heads);
    if (num_heads % attn.gqa.num_kv_heads != 0) {
      r.fail("num_key_value_heads",
             "must divide num_attention_heads (" + std::to_string(num_heads) + ")");
    }
    if (card.hidden_size % num_heads != 0 && !r.has("head_dim")) {
      r.fail("num_attention_heads", "does not divide hidden_size and head_dim is not given");
    }
    attn.gqa.head_dim = r.get_int("head_dim", 1, kMaxDim, card.hidden_size / num_heads);
    attn.gqa.qk_norm = qwen3_moe;
    moe.scoring = ScoringFunc::kSoftmax;
    if (qwen3_moe) {
      moe.num_routed_experts = r.get_int("num_experts", 1, kMaxDim);
      moe.expert_intermediate_size = r.get_int("moe_intermediate_size", 1, kMaxDim);
      const int64_t step = r.get_int("decoder_sparse_step", 1, num_layers, 1);
      const std::vector<int64_t> mlp_only = r.get_int_array("mlp_only_layers");
      for (int64_t i = 0; i < num_layers; ++i) {
        const bool dense_listed = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
        is_moe[static_cast<size_t>(i)] = !dense_listed && (i + 1) % step == 0;
      }
      if (std::count(is_moe.begin(), is_moe.end(), false) > 0) {
        dense_intermediate = r.get_int("intermediate_size", 1, kMaxDim);
      } else {
        r.ignore("intermediate_size");  // only used by dense (mlp_only) layers
      }
    } else {
      moe.num_routed_experts = r.get_int("num_local_experts", 1, kMaxDim);
      moe.expert_intermediate_size = r.get_int("intermediate_size", 1, kMaxDim);
      std::fill(is_moe.begin(), is_moe.end(), true);
    }
  }
  if (moe.num_routed_experts % moe.num_expert_groups != 0) {
    r.fail("n_group", "n_group (" + std::to_string(moe.num_expert_groups) +
                          ") must divide the number of routed experts (" +
                          std::to_string(moe.num_routed_experts) + ")");
  }
  if (moe.topk_groups > moe.num_expert_groups) {
    r.fail("topk_group", "topk_group (" + std::to_string(moe.topk_groups) + ") exceeds n_group (" +
                             std::to_string(moe.num_expert_groups) + ")");
  }
  if (moe.top_k > moe.num_routed_experts) {
    r.fail("num_experts_per_tok", "num_experts_per_tok (" + std::to_string(moe.top_k) +
                                      ") exceeds the number of routed experts (" +
                                      std::to_string(moe.num_routed_experts) + ")");
  }
  card.precision = read_precision(r);
  r.finish();

  card.layers.resize(static_cast<size_t>(num_layers));
  for (size_t i = 0; i < card.layers.size(); ++i) {
    card.layers[i].attention = attn;
    card.layers[i].ffn.is_moe = is_moe[i];
    if (is_moe[i]) {
      card.layers[i].ffn.moe = moe;
    } else {
      card.layers[i].ffn.intermediate_size = dense_intermediate;
    }
  }
  validate_model_card(card);
  return card;
}

}  // namespace moesim::sim
