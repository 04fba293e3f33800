// Step-trace reader: one JSON record per line, validated field by field.
#include "engine/step_trace.h"

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/input_file.h"
#include "base/json_depth.h"
#include "base/json_number.h"
#include "engine/input_error.h"

namespace moesim::engine {

using nlohmann::json;

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

int64_t TraceStep::tokens_on_gpu(int32_t gpu) const {
  int64_t tokens = 0;
  for (const TraceSequence& s : sequences) {
    if (s.gpu == gpu) tokens += s.new_tokens;
  }
  return tokens;
}

const TraceMoeLayer* TraceStep::moe_layer(int64_t layer_idx) const {
  for (const TraceMoeLayer& l : moe_layers) {
    if (l.layer_idx == layer_idx) return &l;
  }
  return nullptr;
}

const TracePlacement& StepTrace::placement_at(int64_t replica_idx, int64_t step_idx,
                                              int64_t layer_idx) const {
  const TracePlacement* found = &placements.front();
  for (const TracePlacement& p : placements) {
    if ((p.replica_idx < 0 || p.replica_idx == replica_idx) &&
        (p.layer_idx < 0 || p.layer_idx == layer_idx) && p.from_step <= step_idx) {
      found = &p;
    }
  }
  return *found;
}

namespace {

// Where a record came from, for messages.
struct Where {
  const std::string& file;
  int64_t line;

  // A reason quoting a huge value is cut to a readable length.
  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    constexpr size_t kMaxReason = 400;
    throw InputError(
        file + ":" + std::to_string(line) + ": " + field + ": " +
        (reason.size() <= kMaxReason ? reason : reason.substr(0, kMaxReason) + "... (cut)"));
  }
};

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}
std::string index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

const json& member(const Where& w, const json& obj, const std::string& path,
                   const std::string& key) {
  if (!obj.is_object()) w.fail(path.empty() ? "record" : path, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) w.fail(join(path, key), "missing");
  return *it;
}

// A value for a message: a scalar as written (at most 40 characters), a container by its kind
// (dumping one is recursive: a deeply nested value overflowed the stack, and a large one made
// the message hundreds of kilobytes).
std::string describe(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

int64_t as_int(const Where& w, const json& v, const std::string& field, int64_t min_value,
               int64_t max_value = std::numeric_limits<int64_t>::max()) {
  // Through json_integer: get<int64_t>() would wrap an unsigned value above INT64_MAX
  // (18446744073709551615 read as -1).
  const std::optional<int64_t> parsed = json_integer(v);
  if (!parsed) w.fail(field, std::string(json_integer_problem(v)) + ", got " + describe(v));
  const int64_t x = *parsed;
  if (x < min_value) {
    w.fail(field, "must be >= " + std::to_string(min_value) + ", got " + std::to_string(x));
  }
  if (x > max_value) {
    w.fail(field, "must be <= " + std::to_string(max_value) + ", got " + std::to_string(x));
  }
  return x;
}

// Upper bounds of the model's dimensions (docs/schemas/step_trace.md), far above any served
// model's (hidden 18,432, FFN 53,248, 896 experts, 128 heads, vocabulary 262,144, 160 layers),
// and low enough that the replay's buffer and weight sizes (products of three or four of them,
// summed over layers) stay inside int64 bytes.
constexpr int64_t kMaxWidth = int64_t{1} << 17;    // hidden, FFN, LoRA ranks, head dims
constexpr int64_t kMaxHeads = int64_t{1} << 12;    // attention heads
constexpr int64_t kMaxExperts = int64_t{1} << 14;  // routed / shared experts, top_k
constexpr int64_t kMaxVocab = int64_t{1} << 22;
constexpr size_t kMaxLayers = 1024;

int64_t int_field(const Where& w, const json& obj, const std::string& path, const std::string& key,
                  int64_t min_value, int64_t max_value = std::numeric_limits<int64_t>::max()) {
  return as_int(w, member(w, obj, path, key), join(path, key), min_value, max_value);
}

int64_t int_field_or(const Where& w, const json& obj, const std::string& path,
                     const std::string& key, int64_t min_value, int64_t fallback,
                     int64_t max_value = std::numeric_limits<int64_t>::max()) {
  if (!obj.contains(key)) return fallback;
  return int_field(w, obj, path, key, min_value, max_value);
}

std::string string_field(const Where& w, const json& obj, const std::string& path,
                         const std::string& key) {
  const json& v = member(w, obj, path, key);
  if (!v.is_string()) w.fail(join(path, key), "expected a string, got " + describe(v));
  return v.get<std::string>();
}

const json& array_field(const Where& w, const json& obj, const std::string& path,
                        const std::string& key) {
  const json& v = member(w, obj, path, key);
  if (!v.is_array()) w.fail(join(path, key), "expected an array");
  return v;
}

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

TracePlacement parse_placement(const Where& w, const json& j, const std::string& path,
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

void parse_header(const Where& w, const json& j, StepTrace& trace) {
  if (string_field(w, j, "", "record") != "header") {
    w.fail("record", "the first record must be the header");
  }
  const std::string schema = string_field(w, j, "", "schema");
  if (schema != kStepTraceSchema) {
    w.fail("schema",
           "unsupported schema '" + schema + "' (expected " + std::string(kStepTraceSchema) + ")");
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
    trace.placements.push_back(parse_placement(w, member(w, j, "", "placement"), "placement",
                                               num_experts, trace.topology.num_gpus));
  } else {
    trace.placements.push_back(TracePlacement{});
  }
}

// Whether GPU g belongs to `replica`.
bool is_gpu_of(const TraceReplica& replica, int64_t g) {
  for (int32_t r : replica.gpus) {
    if (r == g) return true;
  }
  return false;
}

// One entry of a step's "layers" (path `lp`): a MoE layer's routing, checked against the model,
// the placement in force at the step and the step's tokens per GPU of `replica`.
TraceMoeLayer parse_moe_layer(const Where& w, const json& j, const std::string& lp,
                              const StepTrace& trace, const TraceStep& step,
                              const TraceReplica& replica) {
  auto on_replica = [&](int64_t g) { return is_gpu_of(replica, g); };
  const int64_t num_gpus = trace.topology.num_gpus;
  TraceMoeLayer ml;
  ml.layer_idx = int_field(w, j, lp, "layer", 0);
  if (ml.layer_idx >= static_cast<int64_t>(trace.model.layers.size()) ||
      !trace.model.layers[ml.layer_idx].is_moe) {
    w.fail(join(lp, "layer"), "layer " + std::to_string(ml.layer_idx) + " is not a MoE layer");
  }
  if (step.moe_layer(ml.layer_idx) != nullptr) {
    w.fail(join(lp, "layer"), "layer " + std::to_string(ml.layer_idx) + " listed twice");
  }
  const TraceLayer& spec = trace.model.layers[ml.layer_idx];
  const TracePlacement& placement =
      trace.placement_at(step.replica_idx, step.step_idx, ml.layer_idx);
  ml.dispatch_bytes = int_field_or(w, j, lp, "dispatch_bytes", 0, 0);
  ml.combine_bytes = int_field_or(w, j, lp, "combine_bytes", 0, 0);
  const json& routing = array_field(w, j, lp, "routing");
  const std::string rp = join(lp, "routing");
  std::map<int32_t, int64_t> selections_from;
  std::map<std::pair<int32_t, int32_t>, int64_t> per_src_expert;
  for (size_t k = 0; k < routing.size(); ++k) {
    const std::string ep = index(rp, k);
    if (!routing[k].is_array() || routing[k].size() != 4) {
      w.fail(ep, "expected [src_gpu, expert, dst_gpu, count]");
    }
    RoutingEntry e;
    const int64_t src = as_int(w, routing[k][0], index(ep, 0), 0);
    const int64_t expert = as_int(w, routing[k][1], index(ep, 1), 0);
    const int64_t dst = as_int(w, routing[k][2], index(ep, 2), 0);
    e.count = as_int(w, routing[k][3], index(ep, 3), 1);
    if (src >= num_gpus) w.fail(index(ep, 0), "GPU " + std::to_string(src) + " out of range");
    if (dst >= num_gpus) w.fail(index(ep, 2), "GPU " + std::to_string(dst) + " out of range");
    if (!on_replica(src) || !on_replica(dst)) {
      w.fail(index(ep, on_replica(src) ? 2 : 0),
             "GPU " + std::to_string(on_replica(src) ? dst : src) + " is not a GPU of replica " +
                 std::to_string(step.replica_idx) + " (tokens move within a replica)");
    }
    if (expert >= spec.num_routed_experts) {
      w.fail(index(ep, 1), "expert " + std::to_string(expert) + " out of range (" +
                               std::to_string(spec.num_routed_experts) + " routed experts)");
    }
    e.src_gpu = static_cast<int32_t>(src);
    e.expert = static_cast<int32_t>(expert);
    e.dst_gpu = static_cast<int32_t>(dst);
    bool hosted = false;
    for (int32_t g : placement.expert_gpus[expert]) hosted = hosted || g == e.dst_gpu;
    if (!hosted) {
      w.fail(index(ep, 2), "GPU " + std::to_string(dst) + " holds no replica of expert " +
                               std::to_string(expert) + " at step " +
                               std::to_string(step.step_idx));
    }
    selections_from[e.src_gpu] += e.count;
    per_src_expert[{e.src_gpu, e.expert}] += e.count;
    ml.routing.push_back(e);
  }
  for (const auto& [key, count] : per_src_expert) {
    if (count > step.tokens_on_gpu(key.first)) {
      w.fail(rp, "expert " + std::to_string(key.second) + " is chosen " + std::to_string(count) +
                     " times by GPU " + std::to_string(key.first) + ", which has only " +
                     std::to_string(step.tokens_on_gpu(key.first)) + " tokens");
    }
  }
  for (int32_t g : replica.gpus) {
    const int64_t expected = spec.top_k * step.tokens_on_gpu(g);
    const int64_t got = selections_from.count(g) ? selections_from[g] : 0;
    if (got != expected) {
      w.fail(rp, "selections from GPU " + std::to_string(g) + " sum to " + std::to_string(got) +
                     ", expected top_k * tokens = " + std::to_string(expected));
    }
  }
  return ml;
}

void parse_step(const Where& w, const json& j, const StepTrace& trace, TraceStep& step) {
  step.line = w.line;
  step.step_idx = int_field(w, j, "", "step", 0);
  step.replica_idx = int_field(w, j, "", "replica", 0);
  const TraceReplica* replica = nullptr;
  for (const TraceReplica& r : trace.replicas) {
    if (r.replica_idx == step.replica_idx) replica = &r;
  }
  if (replica == nullptr) {
    w.fail("replica", "replica " + std::to_string(step.replica_idx) + " is not in the header");
  }
  step.start_ns = int_field_or(w, j, "", "start_ns", 0, 0);
  step.end_ns = int_field_or(w, j, "", "end_ns", step.start_ns, step.start_ns);
  if (j.contains("sim")) step.sim_step_ns = int_field_or(w, j["sim"], "sim", "step_ns", 0, 0);

  const json& seqs = array_field(w, j, "", "sequences");
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::string sp = index("sequences", i);
    TraceSequence s;
    s.request_id = int_field(w, seqs[i], sp, "request", 0);
    const int64_t g = int_field(w, seqs[i], sp, "gpu", 0);
    if (!is_gpu_of(*replica, g)) {
      w.fail(join(sp, "gpu"), "GPU " + std::to_string(g) + " is not a GPU of replica " +
                                  std::to_string(step.replica_idx));
    }
    s.gpu = static_cast<int32_t>(g);
    const std::string phase = string_field(w, seqs[i], sp, "phase");
    if (phase == "prefill") {
      s.phase = Phase::kPrefill;
    } else if (phase == "decode") {
      s.phase = Phase::kDecode;
    } else {
      w.fail(join(sp, "phase"), "unknown phase '" + phase + "' (valid: prefill, decode)");
    }
    s.new_tokens = int_field(w, seqs[i], sp, "new_tokens", 1);
    s.context_tokens = int_field(w, seqs[i], sp, "context_tokens", 0);
    step.sequences.push_back(s);
  }

  const json& layers = array_field(w, j, "", "layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string lp = index("layers", i);
    step.moe_layers.push_back(parse_moe_layer(w, layers[i], lp, trace, step, *replica));
  }
  int64_t total_tokens = 0;
  for (const TraceSequence& s : step.sequences) total_tokens += s.new_tokens;
  if (total_tokens > 0) {
    for (const TraceLayer& spec : trace.model.layers) {
      if (spec.is_moe && step.moe_layer(spec.layer_idx) == nullptr) {
        w.fail("layers", "MoE layer " + std::to_string(spec.layer_idx) + " is missing");
      }
    }
  }
  std::sort(step.moe_layers.begin(), step.moe_layers.end(),
            [](const auto& a, const auto& b) { return a.layer_idx < b.layer_idx; });
}

}  // namespace

StepTrace parse_step_trace(std::string_view text, const std::string& file_name) {
  StepTrace trace;
  trace.file = file_name;
  std::istringstream in{std::string(text)};
  std::string line_text;
  int64_t line = 0;
  bool have_header = false;
  while (std::getline(in, line_text)) {
    ++line;
    if (line_text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Where w{file_name, line};
    json j;
    try {
      j = parse_json(line_text);
    } catch (const JsonDepthError& e) {
      w.fail("record", std::string("invalid JSON: ") + e.what());
    } catch (const json::parse_error& e) {
      w.fail("record", std::string("invalid JSON: ") + e.what());
    } catch (const json::out_of_range& e) {
      // A number beyond a double (1e400): nlohmann's out_of_range.406.
      w.fail("record", std::string("invalid JSON: ") + e.what());
    }
    if (!j.is_object()) w.fail("record", "expected a JSON object");
    if (!have_header) {
      parse_header(w, j, trace);
      have_header = true;
      continue;
    }
    const std::string kind = string_field(w, j, "", "record");
    if (kind == "step") {
      TraceStep step;
      parse_step(w, j, trace, step);
      trace.steps.push_back(std::move(step));
    } else if (kind == "placement") {
      int64_t num_experts = 0;
      for (const TraceLayer& l : trace.model.layers) {
        if (l.is_moe) num_experts = l.num_routed_experts;
      }
      if (num_experts == 0) w.fail("record", "placement record in a model without MoE layers");
      TracePlacement p = parse_placement(w, j, "", num_experts, trace.topology.num_gpus);
      p.from_step = int_field(w, j, "", "step", 0);
      p.replica_idx = int_field_or(w, j, "", "replica", 0, -1);  // absent: every replica
      if (p.replica_idx >= static_cast<int64_t>(trace.replicas.size())) {
        w.fail("replica", "replica " + std::to_string(p.replica_idx) +
                              " does not exist (the header has " +
                              std::to_string(trace.replicas.size()) + ")");
      }
      p.layer_idx = int_field_or(w, j, "", "layer", 0, -1);  // absent: every MoE layer
      if (p.layer_idx >= static_cast<int64_t>(trace.model.layers.size()) ||
          (p.layer_idx >= 0 && !trace.model.layers[p.layer_idx].is_moe)) {
        w.fail("layer", "layer " + std::to_string(p.layer_idx) + " is not a MoE layer");
      }
      for (const TracePlacement& earlier : trace.placements) {
        if (earlier.replica_idx == p.replica_idx && p.from_step < earlier.from_step) {
          w.fail("step", "placement records of a replica must come in step order");
        }
      }
      trace.placements.push_back(std::move(p));
    } else if (kind == "header") {
      w.fail("record", "a second header");
    } else {
      w.fail("record", "unknown record kind '" + kind + "' (valid: step, placement)");
    }
  }
  if (!have_header) throw InputError(file_name + ":1: record: empty trace (no header)");
  return trace;
}

StepTrace read_step_trace(const std::string& path) {
  InputFile file(path, InputKind::kData);
  std::optional<std::string> text = file.ok() ? file.read_all() : std::nullopt;
  if (!text) {
    throw InputError(path + ": " +
                     (file.problem()->missing ? "cannot open" : file.problem()->reason));
  }
  return parse_step_trace(*text, path);
}

}  // namespace moesim::engine
