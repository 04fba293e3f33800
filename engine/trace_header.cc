// Header parsing shared by the step-trace and request-trace readers.
#include "engine/trace_header.h"

#include <nlohmann/json.hpp>

namespace moesim::engine {

using namespace trace_json;  // NOLINT(build/namespaces): the field readers

std::string_view attention_kind_name(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kMla:
      return "mla";
    case AttentionKind::kGqa:
      return "gqa";
    case AttentionKind::kKda:
      return "kda";
  }
  return "?";
}

int64_t num_routed_experts(const TraceModel& model) {
  for (const TraceLayer& l : model.layers) {
    if (l.is_moe) return l.num_routed_experts;
  }
  return 0;
}

namespace {

// Upper bounds of the model's dimensions (docs/schemas/step_trace.md), far above any served
// model's (hidden 18,432, FFN 53,248, 896 experts, 128 heads, vocabulary 262,144, 160 layers),
// and low enough that the replay's buffer and weight sizes (products of three or four of them,
// summed over layers) stay inside int64 bytes.
constexpr int64_t kMaxWidth = int64_t{1} << 17;    // hidden, FFN, LoRA ranks, head dims
constexpr int64_t kMaxHeads = int64_t{1} << 12;    // attention heads
constexpr int64_t kMaxExperts = int64_t{1} << 14;  // routed / shared experts, top_k
constexpr int64_t kMaxVocab = int64_t{1} << 22;
constexpr size_t kMaxLayers = 1024;

constexpr const char* kDtypeNames[] = {"fp32", "bf16", "fp16", "fp8", "mxfp8", "mxfp4", "nvfp4"};

std::string dtype_field(const Where& w, const json& obj, const std::string& path,
                        const std::string& key, const std::string& fallback) {
  if (!obj.contains(key)) return fallback;
  const std::string v = string_field(w, obj, path, key);
  for (const char* name : kDtypeNames) {
    if (v == name) return v;
  }
  w.fail(join(path, key), "unknown dtype '" + v +
                              "' (valid: fp32, bf16, fp16, fp8, mxfp8, "
                              "mxfp4, nvfp4)");
}

TraceLayer parse_layer(const Where& w, const json& j, const std::string& path, int64_t hidden,
                       size_t expected_idx) {
  TraceLayer layer;
  layer.layer_idx = int_field(w, j, path, "layer", 0);
  if (layer.layer_idx != static_cast<int64_t>(expected_idx)) {
    w.fail(join(path, "layer"),
           "layers must be listed in order 0, 1, ...: expected " + std::to_string(expected_idx));
  }
  const std::string ap = join(path, "attention");
  const json& a = member(w, j, path, "attention");
  const std::string kind = string_field(w, a, ap, "kind");
  if (kind == "mla") {
    layer.attention_kind = AttentionKind::kMla;
    MlaShape& m = layer.mla;
    m.hidden_size = hidden;
    m.num_heads = int_field(w, a, ap, "num_heads", 1, kMaxHeads);
    m.q_lora_rank = int_field_or(w, a, ap, "q_lora_rank", 0, 0, kMaxWidth);
    m.kv_lora_rank = int_field(w, a, ap, "kv_lora_rank", 1, kMaxWidth);
    m.qk_nope_head_dim = int_field(w, a, ap, "qk_nope_head_dim", 1, kMaxWidth);
    m.qk_rope_head_dim = int_field(w, a, ap, "qk_rope_head_dim", 2, kMaxWidth);
    m.v_head_dim = int_field(w, a, ap, "v_head_dim", 1, kMaxWidth);
    if (m.qk_rope_head_dim % 2 != 0) w.fail(join(ap, "qk_rope_head_dim"), "must be even");
  } else if (kind == "gqa") {
    layer.attention_kind = AttentionKind::kGqa;
    GqaShape& g = layer.gqa;
    g.hidden_size = hidden;
    g.num_heads = int_field(w, a, ap, "num_heads", 1, kMaxHeads);
    g.num_kv_heads = int_field(w, a, ap, "num_kv_heads", 1, kMaxHeads);
    g.head_dim = int_field(w, a, ap, "head_dim", 2, kMaxWidth);
    if (g.head_dim % 2 != 0) w.fail(join(ap, "head_dim"), "must be even (RoPE)");
    if (g.num_heads % g.num_kv_heads != 0) {
      w.fail(join(ap, "num_kv_heads"),
             "must divide num_heads (" + std::to_string(g.num_heads) + ")");
    }
    if (a.contains("qk_norm")) {
      if (!a["qk_norm"].is_boolean()) w.fail(join(ap, "qk_norm"), "expected true or false");
      g.qk_norm = a["qk_norm"].get<bool>();
    }
  } else if (kind == "kda") {
    layer.attention_kind = AttentionKind::kKda;
    KdaShape& k = layer.kda;
    k.hidden_size = hidden;
    k.num_heads = int_field(w, a, ap, "num_heads", 1, kMaxHeads);
    k.head_dim_k = int_field(w, a, ap, "head_dim_k", 1, kMaxWidth);
    k.head_dim_v = int_field(w, a, ap, "head_dim_v", 1, kMaxWidth);
    k.short_conv_kernel = int_field_or(w, a, ap, "short_conv_kernel", 1, 4, kMaxWidth);
    k.gate_lora_rank = int_field_or(w, a, ap, "gate_lora_rank", 1, k.head_dim_k, kMaxWidth);
    if (a.contains("output_gate")) {
      if (!a["output_gate"].is_boolean()) w.fail(join(ap, "output_gate"), "expected true or false");
      k.output_gate = a["output_gate"].get<bool>();
    }
  } else {
    w.fail(join(ap, "kind"), "unknown attention kind '" + kind + "' (valid: mla, gqa, kda)");
  }

  const std::string fp = join(path, "ffn");
  const json& f = member(w, j, path, "ffn");
  const std::string ffn_kind = string_field(w, f, fp, "kind");
  if (ffn_kind == "dense") {
    layer.intermediate_size = int_field(w, f, fp, "intermediate_size", 1, kMaxWidth);
  } else if (ffn_kind == "moe") {
    layer.is_moe = true;
    layer.num_routed_experts = int_field(w, f, fp, "num_routed_experts", 1, kMaxExperts);
    layer.top_k = int_field(w, f, fp, "top_k", 1);
    if (layer.top_k > layer.num_routed_experts) {
      w.fail(join(fp, "top_k"),
             "exceeds num_routed_experts (" + std::to_string(layer.num_routed_experts) + ")");
    }
    layer.num_shared_experts = int_field_or(w, f, fp, "num_shared_experts", 0, 0, kMaxExperts);
    layer.expert_intermediate_size = int_field(w, f, fp, "expert_intermediate_size", 1, kMaxWidth);
    if (layer.num_shared_experts > 0) {
      layer.shared_intermediate_size =
          int_field(w, f, fp, "shared_intermediate_size", 1, kMaxWidth);
    }
    const std::string scoring =
        f.contains("scoring") ? string_field(w, f, fp, "scoring") : std::string("softmax");
    if (scoring == "softmax") {
      layer.scoring = ScoringFunc::kSoftmax;
    } else if (scoring == "sigmoid") {
      layer.scoring = ScoringFunc::kSigmoid;
    } else {
      w.fail(join(fp, "scoring"), "unknown scoring '" + scoring + "' (valid: softmax, sigmoid)");
    }
  } else {
    w.fail(join(fp, "kind"), "unknown ffn kind '" + ffn_kind + "' (valid: dense, moe)");
  }
  return layer;
}

}  // namespace

TracePlacement parse_trace_placement(const Where& w, const json& j, const std::string& path,
                                     int64_t num_experts, int64_t num_gpus) {
  TracePlacement p;
  p.num_slots_per_gpu = int_field(w, j, path, "num_slots_per_gpu", 1);
  const json& eg = array_field(w, j, path, "expert_gpus");
  const std::string ep = join(path, "expert_gpus");
  if (static_cast<int64_t>(eg.size()) != num_experts) {
    w.fail(ep, "has " + std::to_string(eg.size()) + " entries, the model has " +
                   std::to_string(num_experts) + " routed experts");
  }
  std::vector<int64_t> slots_used(num_gpus, 0);
  for (size_t e = 0; e < eg.size(); ++e) {
    if (!eg[e].is_array() || eg[e].empty()) w.fail(index(ep, e), "expected a non-empty GPU list");
    std::vector<int32_t> gpus;
    for (size_t i = 0; i < eg[e].size(); ++i) {
      const int64_t g = as_int(w, eg[e][i], index(index(ep, e), i), 0);
      if (g >= num_gpus) {
        w.fail(index(index(ep, e), i), "GPU " + std::to_string(g) + " out of range (topology has " +
                                           std::to_string(num_gpus) + ")");
      }
      gpus.push_back(static_cast<int32_t>(g));
      if (++slots_used[g] > p.num_slots_per_gpu) {
        w.fail(index(index(ep, e), i), "GPU " + std::to_string(g) + " holds more than " +
                                           std::to_string(p.num_slots_per_gpu) + " experts");
      }
    }
    p.expert_gpus.push_back(std::move(gpus));
  }
  return p;
}

TraceHeader parse_trace_header(const Where& w, const json& j, std::string_view schema) {
  TraceHeader trace;
  if (string_field(w, j, "", "record") != "header") {
    w.fail("record", "the first record must be the header");
  }
  const std::string found_schema = string_field(w, j, "", "schema");
  if (found_schema != schema) {
    w.fail("schema",
           "unsupported schema '" + found_schema + "' (expected " + std::string(schema) + ")");
  }
  trace.moesim_version =
      j.contains("moesim_version") ? string_field(w, j, "", "moesim_version") : "";
  trace.scenario = j.contains("scenario") ? string_field(w, j, "", "scenario") : "";
  if (j.contains("overlap")) {
    trace.overlap = string_field(w, j, "", "overlap");
    if (trace.overlap != "none" && trace.overlap != "simple" && trace.overlap != "two_microbatch" &&
        trace.overlap != "decode_pipeline") {
      w.fail("overlap", "unknown overlap '" + trace.overlap +
                            "' (valid: none, simple, two_microbatch, decode_pipeline)");
    }
  }
  trace.seed = static_cast<uint64_t>(int_field_or(w, j, "", "seed", 0, 0));

  const json& m = member(w, j, "", "model");
  TraceModel& model = trace.model;
  model.name = string_field(w, m, "model", "name");
  model.hidden_size = int_field(w, m, "model", "hidden_size", 1, kMaxWidth);
  model.vocab_size = int_field_or(w, m, "model", "vocab_size", 1, 0, kMaxVocab);
  if (m.contains("dtypes")) {
    const json& d = m["dtypes"];
    TraceDtypes& t = model.dtypes;
    t.attention = dtype_field(w, d, "model.dtypes", "attention", t.attention);
    t.dense_ffn = dtype_field(w, d, "model.dtypes", "dense_ffn", t.dense_ffn);
    t.experts = dtype_field(w, d, "model.dtypes", "experts", t.experts);
    t.shared_experts = dtype_field(w, d, "model.dtypes", "shared_experts", t.shared_experts);
    t.kv_cache = dtype_field(w, d, "model.dtypes", "kv_cache", t.kv_cache);
    t.state = dtype_field(w, d, "model.dtypes", "state", t.state);
    t.dispatch = dtype_field(w, d, "model.dtypes", "dispatch", t.dispatch);
    t.combine = dtype_field(w, d, "model.dtypes", "combine", t.combine);
  }
  const json& layers = array_field(w, m, "model", "layers");
  if (layers.empty()) w.fail("model.layers", "must list at least one layer");
  if (layers.size() > kMaxLayers) {
    w.fail("model.layers", "must list at most " + std::to_string(kMaxLayers) + " layers, got " +
                               std::to_string(layers.size()));
  }
  int64_t num_experts = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    TraceLayer layer = parse_layer(w, layers[i], index("model.layers", i), model.hidden_size, i);
    if (layer.is_moe) {
      if (num_experts != 0 && layer.num_routed_experts != num_experts) {
        w.fail(index("model.layers", i) + ".ffn.num_routed_experts",
               "differs between MoE layers (one placement covers all of them)");
      }
      num_experts = layer.num_routed_experts;
    }
    model.layers.push_back(layer);
  }

  const json& topo = member(w, j, "", "topology");
  trace.topology.name = topo.contains("name") ? string_field(w, topo, "topology", "name") : "";
  trace.topology.num_gpus = int_field(w, topo, "topology", "num_gpus", 1);
  trace.topology.gpus_per_node =
      int_field_or(w, topo, "topology", "gpus_per_node", 1, trace.topology.num_gpus);
  trace.topology.gpu = topo.contains("gpu") ? string_field(w, topo, "topology", "gpu") : "";

  const json& replicas = array_field(w, j, "", "replicas");
  if (replicas.empty()) w.fail("replicas", "must list at least one replica");
  for (size_t i = 0; i < replicas.size(); ++i) {
    const std::string rp = index("replicas", i);
    TraceReplica r;
    r.replica_idx = int_field(w, replicas[i], rp, "replica", 0);
    const json& gpus = array_field(w, replicas[i], rp, "gpus");
    for (size_t k = 0; k < gpus.size(); ++k) {
      const int64_t g = as_int(w, gpus[k], index(join(rp, "gpus"), k), 0);
      if (g >= trace.topology.num_gpus) {
        w.fail(index(join(rp, "gpus"), k), "GPU " + std::to_string(g) + " out of range");
      }
      r.gpus.push_back(static_cast<int32_t>(g));
    }
    r.attention =
        replicas[i].contains("attention") ? string_field(w, replicas[i], rp, "attention") : "dp";
    r.attention_tp = int_field_or(w, replicas[i], rp, "attention_tp", 1, 1);
    r.ep_size = int_field_or(w, replicas[i], rp, "ep_size", 1, 1);
    trace.replicas.push_back(std::move(r));
  }

  if (num_experts > 0) {
    trace.placement = parse_trace_placement(w, member(w, j, "", "placement"), "placement",
                                            num_experts, trace.topology.num_gpus);
  }
  return trace;
}

}  // namespace moesim::engine
