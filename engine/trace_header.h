// The header record shared by the engine's trace inputs: a step trace
// (docs/schemas/step_trace.md) and a request trace (docs/schemas/request_trace.md) start with the
// same fields (the simulator writes both with one writer): model shapes and dtypes, topology,
// replicas and the initial expert placement. One parser reads them for both, so a field means
// the same in each and every error is an InputError "FILE:LINE: FIELD: reason".
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend.h"
#include "engine/trace_json.h"

namespace moesim::engine {

enum class AttentionKind { kMla, kGqa, kKda };
// "mla", "gqa", "kda".
std::string_view attention_kind_name(AttentionKind kind);

// One layer of the model: attention shapes (only the member of `kind` is meaningful; hidden
// sizes filled in from the model) and the FFN.
struct TraceLayer {
  int64_t layer_idx = 0;
  AttentionKind attention_kind = AttentionKind::kMla;
  MlaShape mla;
  GqaShape gqa;
  KdaShape kda;
  bool is_moe = false;
  int64_t intermediate_size = 0;  // dense FFN
  // MoE
  int64_t num_routed_experts = 0;
  int64_t top_k = 0;
  int64_t num_shared_experts = 0;
  int64_t expert_intermediate_size = 0;
  int64_t shared_intermediate_size = 0;
  ScoringFunc scoring = ScoringFunc::kSoftmax;
};

// Storage formats named in the trace (step_trace.md lists the values; the replay maps them onto
// what a backend runs and records both).
struct TraceDtypes {
  std::string attention = "bf16";
  std::string dense_ffn = "bf16";
  std::string experts = "bf16";
  std::string shared_experts = "bf16";
  std::string kv_cache = "bf16";
  std::string state = "fp32";
  std::string dispatch = "bf16";
  std::string combine = "bf16";
};

struct TraceModel {
  std::string name;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  TraceDtypes dtypes;
  std::vector<TraceLayer> layers;  // layers[i].layer_idx == i
};

struct TraceTopology {
  std::string name;
  int64_t num_gpus = 0;
  int64_t gpus_per_node = 0;
  std::string gpu;
};

struct TraceReplica {
  int64_t replica_idx = 0;
  std::vector<int32_t> gpus;
  std::string attention;  // "dp" or "tp"
  int64_t attention_tp = 1;
  int64_t ep_size = 1;
};

// Expert -> GPUs holding a replica of it, valid from `from_step` on: for every replica (the
// header's placement, replica_idx -1) or for one replica's steps (a placement record naming it),
// in every MoE layer (layer_idx -1) or in one (a placement record with "layer").
struct TracePlacement {
  int64_t from_step = 0;
  int64_t replica_idx = -1;
  int64_t layer_idx = -1;
  int64_t num_slots_per_gpu = 0;
  std::vector<std::vector<int32_t>> expert_gpus;
};

// The fields common to the step and request trace headers.
struct TraceHeader {
  std::string moesim_version;  // "" when absent
  std::string scenario;        // "" when absent
  uint64_t seed = 0;
  std::string overlap = "none";
  TraceModel model;
  TraceTopology topology;
  std::vector<TraceReplica> replicas;
  TracePlacement placement;  // empty (no expert lists) for a model without MoE layers
};

// The routed experts of the model's MoE layers (all equal), 0 without MoE layers.
int64_t num_routed_experts(const TraceModel& model);

// Parses record `j` (line `w`) as a header of `schema`: "record" must be "header" and "schema"
// equal `schema`. Keys it does not know are left to the caller.
TraceHeader parse_trace_header(const trace_json::Where& w, const nlohmann::json& j,
                               std::string_view schema);

// A placement object at `path` (num_slots_per_gpu, expert_gpus) for `num_experts` experts on
// `num_gpus` GPUs.
TracePlacement parse_trace_placement(const trace_json::Where& w, const nlohmann::json& j,
                                     const std::string& path, int64_t num_experts,
                                     int64_t num_gpus);

}  // namespace moesim::engine
