// HuggingFace config.json import. A small reader records every key asked for; keys neither
// asked for nor on the ignore list of known, architecture-neutral keys are errors. Errors carry
// the key path (text_config.hidden_size, quantization_config.config_groups.group_0.weights.
// num_bits) and the line:col of the key's first occurrence in the text (JSON has no node
// positions).
//
// One function per family reads the architecture; hf_quantization.cc-style logic for the
// quantisation_config lives in read_quantization below. Key names of transformers 4.x and 5.x
// are both accepted (torch_dtype / dtype, rope_scaling + rope_theta / rope_parameters,
// num_experts / num_local_experts); when both spellings are present they must agree.
#include "sim/model/hf_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "base/json_depth.h"
#include "sim/config/config_error.h"
#include "sim/model/hf_quantization.h"

namespace moesim::sim {
namespace {

using nlohmann::json;

// Known keys that do not change sizes, bytes or FLOPs (documented in docs/models.md).
const std::set<std::string, std::less<>> kIgnoredKeys = {
    "_name_or_path",
    "architectures",
    "attention_bias",
    "attention_chunk_size",
    "attention_dropout",
    "attn_scale",
    "attn_temperature_tuning",
    "auto_map",
    "aux_loss_alpha",
    "bos_token_id",
    "cache_implementation",
    "eos_token_id",
    "ep_size",
    "floor_scale",
    "hidden_act",
    "initial_context_length",
    "initializer_range",
    "max_window_layers",
    "mlp_bias",
    "no_rope_layers",
    "norm_topk_prob",
    "output_router_logits",
    "pad_token_id",
    "partial_rotary_factor",
    "pretraining_tp",
    "qkv_bias",
    "rms_norm_eps",
    "rope_interleave",
    "rope_parameters",
    "rope_scaling",
    "rope_theta",
    "routed_scaling_factor",
    "router_aux_loss_coef",
    "router_jitter_noise",
    "seq_aux",
    "sliding_window",
    "swiglu_limit",
    "topk_method",
    "transformers_version",
    "use_cache",
    "use_sliding_window",
};

constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxTokens = int64_t{1} << 40;
constexpr int64_t kMaxLayers = 4096;

enum class Family { kDeepSeek, kGlm4Moe, kQwen2Moe, kQwen3Moe, kMixtral, kLlama4, kGptOss };

const char kValidModelTypes[] =
    "deepseek_v2, deepseek_v3, kimi_k2, glm4_moe, qwen2_moe, qwen3_moe, mixtral, llama4, "
    "llama4_text, gpt_oss";

std::optional<Family> family_of(const std::string& model_type) {
  if (model_type == "deepseek_v2" || model_type == "deepseek_v3" || model_type == "kimi_k2") {
    return Family::kDeepSeek;
  }
  if (model_type == "glm4_moe") return Family::kGlm4Moe;
  if (model_type == "qwen2_moe") return Family::kQwen2Moe;
  if (model_type == "qwen3_moe") return Family::kQwen3Moe;
  if (model_type == "mixtral") return Family::kMixtral;
  if (model_type == "llama4" || model_type == "llama4_text") return Family::kLlama4;
  if (model_type == "gpt_oss") return Family::kGptOss;
  return std::nullopt;
}

// What read_family produces besides the layers.
struct Architecture {
  AttentionSpec attention;
  MoeSpec moe;
  std::vector<bool> is_moe;
  int64_t dense_intermediate = 0;
  bool router_is_linear = false;  // the router is an nn.Linear (targeted by "Linear" rules)
};

void read_deepseek(HfJsonReader& r, int64_t num_layers, int64_t num_heads, Architecture* a) {
  AttentionSpec& attn = a->attention;
  MoeSpec& moe = a->moe;
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
  const int64_t first_k_dense = r.get_int("first_k_dense_replace", 0, num_layers, 0);
  const int64_t freq = r.get_int("moe_layer_freq", 1, num_layers, 1);
  for (int64_t i = 0; i < num_layers; ++i) {
    a->is_moe[static_cast<size_t>(i)] = i >= first_k_dense && i % freq == 0;
  }
  if (first_k_dense > 0 || freq > 1) {
    a->dense_intermediate = r.get_int("intermediate_size", 1, kMaxDim);
  } else {
    r.ignore("intermediate_size");
  }
  a->router_is_linear = false;  // DeepSeek's MoEGate is a bare weight parameter
}

// GQA attention shared by the non-MLA families; `qk_norm` per family.
void read_gqa(HfJsonReader& r, int64_t hidden, int64_t num_heads, bool qk_norm,
              AttentionSpec* attn) {
  attn->kind = AttentionKind::kGQA;
  attn->gqa.num_heads = num_heads;
  attn->gqa.num_kv_heads = r.get_int("num_key_value_heads", 1, num_heads, num_heads);
  if (num_heads % attn->gqa.num_kv_heads != 0) {
    r.fail("num_key_value_heads",
           "must divide num_attention_heads (" + std::to_string(num_heads) + ")");
  }
  if (hidden % num_heads != 0 && !r.has("head_dim")) {
    r.fail("num_attention_heads", "does not divide hidden_size and head_dim is not given");
  }
  attn->gqa.head_dim = r.get_int("head_dim", 1, kMaxDim, hidden / num_heads);
  attn->gqa.qk_norm = qk_norm;
}

// Qwen2-MoE / Qwen3-MoE: num_experts (4.x) or num_local_experts (5.x spelling).
int64_t read_num_experts(HfJsonReader& r, const char* primary, const char* alias) {
  const bool has_primary = r.has(primary);
  const bool has_alias = r.has(alias);
  if (!has_primary && !has_alias) {
    r.fail(primary, std::string("missing required key (integer; or its alias '") + alias + "')");
  }
  const int64_t v = has_primary ? r.get_int(primary, 1, kMaxDim) : r.get_int(alias, 1, kMaxDim);
  if (has_primary && has_alias && r.get_int(alias, 1, kMaxDim) != v) {
    r.fail(alias, std::string("disagrees with '") + primary + "' (" + std::to_string(v) + ")");
  }
  return v;
}

void read_qwen_sparse_layers(HfJsonReader& r, int64_t num_layers, Architecture* a) {
  const int64_t step = r.get_int("decoder_sparse_step", 1, num_layers, 1);
  const std::vector<int64_t> mlp_only = r.get_int_array("mlp_only_layers", 0, num_layers - 1);
  for (int64_t i = 0; i < num_layers; ++i) {
    const bool dense_listed = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
    a->is_moe[static_cast<size_t>(i)] = !dense_listed && (i + 1) % step == 0;
  }
  if (std::count(a->is_moe.begin(), a->is_moe.end(), false) > 0) {
    a->dense_intermediate = r.get_int("intermediate_size", 1, kMaxDim);
  } else {
    r.ignore("intermediate_size");  // only used by dense (mlp_only) layers
  }
}

void read_family(Family family, HfJsonReader& r, int64_t hidden, int64_t num_layers,
                 int64_t num_heads, Architecture* a) {
  MoeSpec& moe = a->moe;
  moe.scoring = ScoringFunc::kSoftmax;
  switch (family) {
    case Family::kDeepSeek:
      read_deepseek(r, num_layers, num_heads, a);
      return;
    case Family::kGlm4Moe: {
      read_gqa(r, hidden, num_heads, r.get_bool("use_qk_norm", false), &a->attention);
      moe.num_routed_experts = r.get_int("n_routed_experts", 1, kMaxDim);
      moe.num_shared_experts = r.get_int("n_shared_experts", 0, kMaxDim, 0);
      moe.expert_intermediate_size = r.get_int("moe_intermediate_size", 1, kMaxDim);
      moe.shared_intermediate_size = moe.expert_intermediate_size;
      moe.num_expert_groups = r.get_int("n_group", 1, kMaxDim, 1);
      moe.topk_groups = r.get_int("topk_group", 1, kMaxDim, 1);
      // Glm4MoeTopkRouter: sigmoid scores with an e_score_correction_bias (noaux_tc).
      moe.scoring = ScoringFunc::kSigmoid;
      const int64_t first_k_dense = r.get_int("first_k_dense_replace", 0, num_layers, 0);
      for (int64_t i = 0; i < num_layers; ++i)
        a->is_moe[static_cast<size_t>(i)] = i >= first_k_dense;
      if (first_k_dense > 0) {
        a->dense_intermediate = r.get_int("intermediate_size", 1, kMaxDim);
      } else {
        r.ignore("intermediate_size");
      }
      a->router_is_linear = false;
      return;
    }
    case Family::kQwen2Moe: {
      read_gqa(r, hidden, num_heads, false, &a->attention);
      moe.num_routed_experts = read_num_experts(r, "num_experts", "num_local_experts");
      moe.expert_intermediate_size = r.get_int("moe_intermediate_size", 1, kMaxDim);
      // One shared expert of its own width (its sigmoid gate, hidden -> 1, is not counted).
      const int64_t shared = r.get_int("shared_expert_intermediate_size", 0, kMaxDim, 0);
      moe.num_shared_experts = shared > 0 ? 1 : 0;
      moe.shared_intermediate_size = shared;
      read_qwen_sparse_layers(r, num_layers, a);
      a->router_is_linear = true;
      return;
    }
    case Family::kQwen3Moe:
      read_gqa(r, hidden, num_heads, true, &a->attention);
      moe.num_routed_experts = read_num_experts(r, "num_experts", "num_local_experts");
      moe.expert_intermediate_size = r.get_int("moe_intermediate_size", 1, kMaxDim);
      read_qwen_sparse_layers(r, num_layers, a);
      a->router_is_linear = true;
      return;
    case Family::kMixtral:
      read_gqa(r, hidden, num_heads, false, &a->attention);
      moe.num_routed_experts = r.get_int("num_local_experts", 1, kMaxDim);
      moe.expert_intermediate_size = r.get_int("intermediate_size", 1, kMaxDim);
      std::fill(a->is_moe.begin(), a->is_moe.end(), true);
      a->router_is_linear = true;
      return;
    case Family::kLlama4: {
      // Llama4TextL2Norm on q and k has no weights, so use_qk_norm adds no parameters.
      r.ignore("use_qk_norm");
      read_gqa(r, hidden, num_heads, false, &a->attention);
      moe.num_routed_experts = r.get_int("num_local_experts", 1, kMaxDim);
      moe.expert_intermediate_size = r.get_int("intermediate_size", 1, kMaxDim);
      // Every MoE layer has one shared expert as wide as a routed one.
      moe.num_shared_experts = 1;
      moe.shared_intermediate_size = moe.expert_intermediate_size;
      const int64_t step = r.get_int("interleave_moe_layer_step", 1, num_layers, 1);
      std::vector<int64_t> moe_layers = r.get_int_array("moe_layers", 0, num_layers - 1);
      std::vector<int64_t> from_step;
      for (int64_t i = step - 1; i < num_layers; i += step) from_step.push_back(i);
      if (r.has("moe_layers") && moe_layers != from_step) {
        r.fail("moe_layers",
               "disagrees with interleave_moe_layer_step (" + std::to_string(step) + ")");
      }
      for (int64_t i : from_step) a->is_moe[static_cast<size_t>(i)] = true;
      if (static_cast<int64_t>(from_step.size()) < num_layers) {
        a->dense_intermediate = r.get_int("intermediate_size_mlp", 1, kMaxDim);
      } else {
        r.ignore("intermediate_size_mlp");
      }
      a->router_is_linear = true;
      return;
    }
    case Family::kGptOss: {
      read_gqa(r, hidden, num_heads, false, &a->attention);
      moe.num_routed_experts = r.get_int("num_local_experts", 1, kMaxDim);
      moe.expert_intermediate_size = r.get_int("intermediate_size", 1, kMaxDim);
      std::fill(a->is_moe.begin(), a->is_moe.end(), true);
      // experts_per_token is the original checkpoint's spelling of num_experts_per_tok.
      if (r.has("experts_per_token") && r.get_int("experts_per_token", 1, kMaxDim) !=
                                            r.get_int("num_experts_per_tok", 1, kMaxDim)) {
        r.fail("experts_per_token", "disagrees with num_experts_per_tok");
      }
      const std::vector<std::string> types = r.get_string_array("layer_types");
      if (!types.empty() && static_cast<int64_t>(types.size()) != num_layers) {
        r.fail("layer_types", "has " + std::to_string(types.size()) + " entries for " +
                                  std::to_string(num_layers) + " layers");
      }
      for (const std::string& t : types) {
        if (t != "sliding_attention" && t != "full_attention") {
          r.fail("layer_types",
                 "unknown layer type '" + t + "' (valid: sliding_attention, full_attention)");
        }
      }
      a->router_is_linear = false;  // GptOssTopKRouter is not an nn.Linear
      return;
    }
  }
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
    // A number beyond double range (1e400): nlohmann names the token, not its position.
    std::string what = e.what();
    const size_t q1 = what.find('\'');
    const size_t q2 = what.rfind('\'');
    const std::string token =
        q1 != std::string::npos && q2 > q1 ? what.substr(q1 + 1, q2 - q1 - 1) : "";
    int line = 0, col = 0;
    const size_t at = token.empty() ? std::string_view::npos : json_text.find(token);
    if (at != std::string_view::npos) hf_line_col(json_text, at, &line, &col);
    throw ConfigError(file, line, col, "",
                      "number out of range" + (token.empty() ? std::string() : " '" + token + "'") +
                          " (beyond double precision)");
  } catch (const json::parse_error& e) {
    int line = 0, col = 0;
    hf_line_col(json_text, e.byte > 0 ? e.byte - 1 : 0, &line, &col);
    std::string what = e.what();
    // nlohmann's text: "[json.exception.parse_error.101] parse error at line L, column C: WHY"
    const size_t colon = what.find(": ");
    throw ConfigError(
        file, line, col, "",
        "JSON syntax error: " + (colon == std::string::npos ? what : what.substr(colon + 2)));
  }
  if (!root.is_object()) throw ConfigError(file, 1, 1, "", "expected a JSON object at top level");

  HfJsonReader top(root, json_text, file, "", &kIgnoredKeys);
  const std::string model_type = top.get_string("model_type");
  const std::optional<Family> family = family_of(model_type);
  if (!family) {
    top.fail("model_type",
             "unsupported model_type '" + model_type + "' (valid: " + kValidModelTypes + ")");
  }
  // Llama 4 checkpoints are multimodal: the language model is in text_config, the vision tower
  // (not modelled) in vision_config.
  std::optional<HfJsonReader> text_reader;
  if (model_type == "llama4") {
    const json* text_config = top.get_object("text_config");
    if (text_config == nullptr) top.fail("model_type", "llama4 needs a text_config object");
    for (const char* k :
         {"vision_config", "boi_token_index", "eoi_token_index", "image_token_index"}) {
      top.ignore(k);
    }
    text_reader.emplace(*text_config, json_text, file, "text_config.", &kIgnoredKeys);
    const std::string inner = text_reader->get_string("model_type", "llama4_text");
    if (inner != "llama4_text") {
      text_reader->fail("model_type",
                        "expected 'llama4_text' inside a llama4 config, got '" + inner + "'");
    }
  }
  HfJsonReader& r = text_reader ? *text_reader : top;

  ModelCard card;
  card.source_file = file;
  card.name = name.empty() ? model_type : name;
  card.hidden_size = r.get_int("hidden_size", 1, kMaxDim);
  card.vocab_size = r.get_int("vocab_size", 1, kMaxTokens);
  card.max_context_tokens = r.get_int("max_position_embeddings", 1, kMaxTokens);
  card.tie_word_embeddings = r.get_bool("tie_word_embeddings", false);
  if (text_reader) top.ignore("tie_word_embeddings");  // the wrapper repeats the text model's
  const int64_t num_layers = r.get_int("num_hidden_layers", 1, kMaxLayers);
  const int64_t num_heads = r.get_int("num_attention_heads", 1, kMaxDim);

  Architecture arch;
  arch.is_moe.assign(static_cast<size_t>(num_layers), false);
  arch.moe.top_k = r.get_int("num_experts_per_tok", 1, kMaxDim);
  read_family(*family, r, card.hidden_size, num_layers, num_heads, &arch);
  if (*family == Family::kDeepSeek || *family == Family::kGlm4Moe) {
    card.num_mtp_layers = r.get_int("num_nextn_predict_layers", 0, 64, 0);
  }

  const MoeSpec& moe = arch.moe;
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

  card.layers.resize(static_cast<size_t>(num_layers));
  for (size_t i = 0; i < card.layers.size(); ++i) {
    card.layers[i].attention = arch.attention;
    card.layers[i].ffn.is_moe = arch.is_moe[i];
    if (arch.is_moe[i]) {
      card.layers[i].ffn.moe = moe;
    } else {
      card.layers[i].ffn.intermediate_size = arch.dense_intermediate;
    }
  }

  // dtype and quantization_config: a llama4 wrapper carries them at the top level; its
  // text_config may repeat the dtype.
  const DType base = read_hf_dtype(top, text_reader ? &*text_reader : nullptr);
  card.precision = read_hf_precision(top, base, card, arch.router_is_linear);
  top.finish();
  if (text_reader) text_reader->finish();
  validate_model_card(card);
  return card;
}

}  // namespace moesim::sim
