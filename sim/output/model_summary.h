// A model card's derived quantities gathered for reporting: `moesim model show` prints this
// struct as text or JSON; tests check both printers against the derivation functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/model/model_card.h"

namespace moesim::sim {

struct ModelSummary {
  std::string name;
  std::string source_file;
  int64_t context_tokens = 0;  // context at which decode FLOPs and KV bytes per sequence are given
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t max_context_tokens = 0;
  int64_t num_layers = 0;
  int64_t num_moe_layers = 0;
  int64_t num_dense_layers = 0;
  int64_t num_mtp_layers = 0;

  ParamCounts total;   // all parameters by component (MTP excluded)
  ParamCounts active;  // per token (routed experts limited to top_k)
  double total_params = 0;
  double active_params = 0;  // with the input embedding
  double active_params_excluding_input_embedding = 0;
  double mtp_params = 0;

  // Weights by tensor group, at each group's precision.
  struct GroupWeights {
    TensorGroup group;
    DType dtype;
    double params = 0;
    double weight_bytes = 0;
    double bits_per_element = 0;  // stored bits per weight (weight_bits_per_element)
    std::string storage_format;   // Precision::storage's format; "" when stored as the dtype
  };
  std::vector<GroupWeights> weights;  // every group with params > 0, in TensorGroup order
  double total_weight_bytes = 0;

  // Routed experts of the first MoE layer (all zero for a dense model).
  int64_t num_routed_experts = 0;
  int64_t top_k = 0;
  double expert_params = 0;
  double expert_weight_bytes = 0;

  // Cache and state by attention kind present in the model, in AttentionKind order.
  struct KindState {
    AttentionKind kind;
    int64_t num_layers = 0;
    double kv_bytes_per_token_per_layer = 0;
    double recurrent_state_bytes_per_sequence_per_layer = 0;
  };
  std::vector<KindState> by_kind;
  DType kv_dtype = DType::kBF16;
  DType recurrent_state_dtype = DType::kFP32;
  double kv_bytes_per_token = 0;                  // all layers
  double kv_bytes_per_sequence_at_context = 0;    // kv_bytes_per_token * context_tokens
  double recurrent_state_bytes_per_sequence = 0;  // all layers

  double prefill_flops_per_token = 0;  // mean over a prompt of context_tokens tokens
  double decode_flops_per_token = 0;   // one token at context_tokens
};

// Gathers the summary. Precondition: card validated, context_tokens >= 1 (the caller checks it
// against card.max_context_tokens when that matters).
ModelSummary describe_model(const ModelCard& card, int64_t context_tokens);

// Human-readable report, several lines, ending in a newline.
std::string format_model_summary_text(const ModelSummary& s);
// One JSON document (pretty-printed, 2-space indent, trailing newline). Keys carry units:
// total_params, active_params, weight_bytes, kv_bytes_per_token, prefill_flops_per_token, ...
std::string format_model_summary_json(const ModelSummary& s);

}  // namespace moesim::sim
