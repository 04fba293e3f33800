// Step-trace reader: one JSON record per line, validated field by field.
#include "engine/step_trace.h"

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "engine/input_error.h"
#include "engine/trace_json.h"

namespace moesim::engine {

using nlohmann::json;

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

using namespace trace_json;  // NOLINT(build/namespaces): the field readers

namespace {

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
    const json j = parse_record(w, line_text);
    if (!have_header) {
      TraceHeader header = parse_trace_header(w, j, kStepTraceSchema);
      trace.moesim_version = std::move(header.moesim_version);
      trace.scenario = std::move(header.scenario);
      trace.seed = header.seed;
      trace.overlap = std::move(header.overlap);
      trace.model = std::move(header.model);
      trace.topology = std::move(header.topology);
      trace.replicas = std::move(header.replicas);
      trace.placements.push_back(std::move(header.placement));
      have_header = true;
      continue;
    }
    const std::string kind = string_field(w, j, "", "record");
    if (kind == "step") {
      TraceStep step;
      parse_step(w, j, trace, step);
      trace.steps.push_back(std::move(step));
    } else if (kind == "placement") {
      const int64_t num_experts = num_routed_experts(trace.model);
      if (num_experts == 0) w.fail("record", "placement record in a model without MoE layers");
      TracePlacement p = parse_trace_placement(w, j, "", num_experts, trace.topology.num_gpus);
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
  return parse_step_trace(read_data_file(path), path);
}

}  // namespace moesim::engine
