#include "sim/output/model_summary.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "sim/cost/op_formulas.h"

namespace moesim::sim {
namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// 671026419200 -> "671.026 B"; 1.9e6 -> "1.900 M".
std::string count(double v) {
  if (v >= 1e12) return fmt("%.4f T", v / 1e12);
  if (v >= 1e9) return fmt("%.3f B", v / 1e9);
  if (v >= 1e6) return fmt("%.3f M", v / 1e6);
  if (v >= 1e3) return fmt("%.3f K", v / 1e3);
  return fmt("%.0f", v);
}

// Binary units: "1.250 GiB".
std::string bytes(double v) {
  if (v >= 1099511627776.0) return fmt("%.3f TiB", v / 1099511627776.0);
  if (v >= 1073741824.0) return fmt("%.3f GiB", v / 1073741824.0);
  if (v >= 1048576.0) return fmt("%.3f MiB", v / 1048576.0);
  if (v >= 1024.0) return fmt("%.3f KiB", v / 1024.0);
  return fmt("%.6g bytes", v);
}

std::string flops(double v) {
  if (v >= 1e12) return fmt("%.3f TFLOP", v / 1e12);
  if (v >= 1e9) return fmt("%.3f GFLOP", v / 1e9);
  return fmt("%.3f MFLOP", v / 1e6);
}

nlohmann::json param_counts_json(const ParamCounts& c) {
  return {{"embedding_params", c.embedding},
          {"lm_head_params", c.lm_head},
          {"attention_params", c.attention},
          {"dense_ffn_params", c.dense_ffn},
          {"router_params", c.router},
          {"routed_expert_params", c.routed_experts},
          {"shared_expert_params", c.shared_experts},
          {"norm_params", c.norms}};
}

}  // namespace

ModelSummary describe_model(const ModelCard& card, int64_t context_tokens) {
  ModelSummary s;
  s.name = card.name;
  s.source_file = card.source_file;
  s.context_tokens = context_tokens;
  s.hidden_size = card.hidden_size;
  s.vocab_size = card.vocab_size;
  s.max_context_tokens = card.max_context_tokens;
  s.num_layers = static_cast<int64_t>(card.layers.size());
  s.num_moe_layers = num_moe_layers(card);
  s.num_dense_layers = s.num_layers - s.num_moe_layers;
  s.num_mtp_layers = card.num_mtp_layers;
  s.total = total_param_counts(card);
  s.active = active_param_counts(card);
  s.total_params = s.total.total();
  s.active_params = s.active.total();
  s.active_params_excluding_input_embedding = s.active.total() - s.active.embedding;
  s.mtp_params = mtp_params(card);
  for (int g = 0; g < kNumTensorGroups; ++g) {
    const auto group = static_cast<TensorGroup>(g);
    const double params = s.total.group(group);
    if (params <= 0) continue;
    s.weights.push_back({group, tensor_group_dtype(card.precision, group), params,
                         weight_bytes(card, group), weight_bits_per_element(card.precision, group),
                         card.precision.storage[static_cast<size_t>(group)].format});
    s.total_weight_bytes += s.weights.back().weight_bytes;
  }
  for (const LayerSpec& l : card.layers) {
    if (!l.ffn.is_moe) continue;
    s.num_routed_experts = l.ffn.moe.num_routed_experts;
    s.top_k = l.ffn.moe.top_k;
    s.expert_params = expert_params(l.ffn.moe, card.hidden_size);
    s.expert_weight_bytes = expert_weight_bytes(card, l.ffn.moe);
    break;
  }
  s.kv_dtype = card.precision.kv_cache;
  s.recurrent_state_dtype = card.precision.recurrent_state;
  for (AttentionKind kind : {AttentionKind::kMLA, AttentionKind::kGQA, AttentionKind::kKDA}) {
    ModelSummary::KindState k{kind};
    for (const LayerSpec& l : card.layers) {
      if (l.attention.kind != kind) continue;
      if (k.num_layers == 0) {
        k.kv_bytes_per_token_per_layer = kv_bytes_per_token(l.attention, s.kv_dtype);
        k.recurrent_state_bytes_per_sequence_per_layer =
            recurrent_state_bytes_per_sequence(l.attention, s.recurrent_state_dtype);
      }
      ++k.num_layers;
    }
    if (k.num_layers > 0) s.by_kind.push_back(k);
  }
  s.kv_bytes_per_token = kv_bytes_per_token(card);
  s.kv_bytes_per_sequence_at_context = s.kv_bytes_per_token * static_cast<double>(context_tokens);
  s.recurrent_state_bytes_per_sequence = recurrent_state_bytes_per_sequence(card);
  s.prefill_flops_per_token = prefill_flops_per_token(card, context_tokens);
  s.decode_flops_per_token = decode_flops_per_token(card, context_tokens);
  return s;
}

std::string format_model_summary_text(const ModelSummary& s) {
  std::string out;
  auto line = [&out](const std::string& label, const std::string& value) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "  %-38s %s\n", label.c_str(), value.c_str());
    out += buf;
  };
  out += "model " + s.name + (s.source_file.empty() ? "" : " (" + s.source_file + ")") + "\n";
  out += "architecture\n";
  line("hidden size / vocabulary",
       std::to_string(s.hidden_size) + " / " + std::to_string(s.vocab_size));
  line("layers (MoE + dense)", std::to_string(s.num_layers) + " (" +
                                   std::to_string(s.num_moe_layers) + " + " +
                                   std::to_string(s.num_dense_layers) + ")");
  for (const auto& k : s.by_kind) {
    line(std::string(attention_kind_name(k.kind)) + " layers", std::to_string(k.num_layers));
  }
  if (s.num_routed_experts > 0) {
    line("routed experts (top-k)",
         std::to_string(s.num_routed_experts) + " (top-" + std::to_string(s.top_k) + ")");
  }
  line("max context", std::to_string(s.max_context_tokens) + " tokens");
  out += "parameters\n";
  line("total", count(s.total_params));
  line("active per token", count(s.active_params));
  line("active without input embedding", count(s.active_params_excluding_input_embedding));
  if (s.num_mtp_layers > 0) {
    line("MTP modules (not in total)",
         std::to_string(s.num_mtp_layers) + " x, " + count(s.mtp_params));
  }
  out += "weights by tensor group\n";
  for (const auto& w : s.weights) {
    const std::string format =
        w.storage_format.empty() ? std::string(dtype_name(w.dtype)) : w.storage_format;
    line(std::string(tensor_group_name(w.group)) + " (" + format + ")",
         count(w.params) + " params, " + bytes(w.weight_bytes));
  }
  line("total", bytes(s.total_weight_bytes));
  if (s.num_routed_experts > 0) {
    line("one routed expert", count(s.expert_params) + " params, " + bytes(s.expert_weight_bytes));
  }
  out += "cache and state (kv " + std::string(dtype_name(s.kv_dtype)) + ", state " +
         std::string(dtype_name(s.recurrent_state_dtype)) + ")\n";
  for (const auto& k : s.by_kind) {
    const std::string kind(attention_kind_name(k.kind));
    if (k.kind == AttentionKind::kKDA) {
      line(kind + " state per sequence per layer",
           bytes(k.recurrent_state_bytes_per_sequence_per_layer));
    } else {
      line(kind + " KV per token per layer", bytes(k.kv_bytes_per_token_per_layer));
    }
  }
  line("KV per token (all layers)", bytes(s.kv_bytes_per_token));
  line("KV per sequence at " + std::to_string(s.context_tokens) + " tokens",
       bytes(s.kv_bytes_per_sequence_at_context));
  line("recurrent state per sequence", bytes(s.recurrent_state_bytes_per_sequence));
  out += "FLOPs per token at context " + std::to_string(s.context_tokens) + "\n";
  line("prefill (mean over the prompt)", flops(s.prefill_flops_per_token));
  line("decode", flops(s.decode_flops_per_token));
  return out;
}

std::string format_model_summary_json(const ModelSummary& s) {
  nlohmann::json j;
  j["name"] = s.name;
  j["source_file"] = s.source_file;
  j["context_tokens"] = s.context_tokens;
  j["hidden_size"] = s.hidden_size;
  j["vocab_size"] = s.vocab_size;
  j["max_context_tokens"] = s.max_context_tokens;
  j["num_layers"] = s.num_layers;
  j["num_moe_layers"] = s.num_moe_layers;
  j["num_dense_layers"] = s.num_dense_layers;
  j["num_mtp_layers"] = s.num_mtp_layers;
  j["total_params"] = s.total_params;
  j["active_params"] = s.active_params;
  j["active_params_excluding_input_embedding"] = s.active_params_excluding_input_embedding;
  j["mtp_params"] = s.mtp_params;
  j["total_params_by_component"] = param_counts_json(s.total);
  j["active_params_by_component"] = param_counts_json(s.active);
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& w : s.weights) {
    groups.push_back({{"group", tensor_group_name(w.group)},
                      {"dtype", dtype_name(w.dtype)},
                      {"bits_per_element", w.bits_per_element},
                      {"storage_format", w.storage_format},
                      {"params", w.params},
                      {"weight_bytes", w.weight_bytes}});
  }
  j["weights_by_group"] = groups;
  j["total_weight_bytes"] = s.total_weight_bytes;
  j["num_routed_experts"] = s.num_routed_experts;
  j["top_k"] = s.top_k;
  j["expert_params"] = s.expert_params;
  j["expert_weight_bytes"] = s.expert_weight_bytes;
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& k : s.by_kind) {
    kinds.push_back({{"kind", attention_kind_name(k.kind)},
                     {"num_layers", k.num_layers},
                     {"kv_bytes_per_token_per_layer", k.kv_bytes_per_token_per_layer},
                     {"recurrent_state_bytes_per_sequence_per_layer",
                      k.recurrent_state_bytes_per_sequence_per_layer}});
  }
  j["attention_kinds"] = kinds;
  j["kv_dtype"] = dtype_name(s.kv_dtype);
  j["recurrent_state_dtype"] = dtype_name(s.recurrent_state_dtype);
  j["kv_bytes_per_token"] = s.kv_bytes_per_token;
  j["kv_bytes_per_sequence_at_context"] = s.kv_bytes_per_sequence_at_context;
  j["recurrent_state_bytes_per_sequence"] = s.recurrent_state_bytes_per_sequence;
  j["prefill_flops_per_token"] = s.prefill_flops_per_token;
  j["decode_flops_per_token"] = s.decode_flops_per_token;
  return j.dump(2) + "\n";
}

}  // namespace moesim::sim
