#include "sim/calibration/step_trace_reader.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "base/json_number.h"
#include "sim/config/config_error.h"
#include "sim/config/input_files.h"

namespace moesim::sim {
namespace {

using nlohmann::json;

struct Ctx {
  const std::string& file;
  int line;
  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    throw ConfigError(file, line, 0, field, reason);
  }
  const json& at(const json& j, const std::string& field) const {
    if (!j.is_object() || !j.contains(field)) fail(field, "missing");
    return j.at(field);
  }
  int64_t get_int(const json& j, const std::string& field) const {
    const json& v = at(j, field);
    if (!v.is_number_integer()) fail(field, "must be an integer");
    const std::optional<int64_t> x = json_integer<int64_t>(v);
    if (!x) fail(field, "integer out of range (int64)");
    return *x;
  }
  // An integer in [lo, hi].
  int64_t get_int_in(const json& j, const std::string& field, int64_t lo, int64_t hi) const {
    const int64_t v = get_int(j, field);
    if (v < lo || v > hi) {
      fail(field, "value " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
    }
    return v;
  }
  int32_t get_int32(const json& j, const std::string& field) const {
    return static_cast<int32_t>(get_int_in(j, field, INT32_MIN, INT32_MAX));
  }
  double get_double(const json& j, const std::string& field) const {
    const json& v = at(j, field);
    if (!v.is_number()) fail(field, "must be a number");
    return v.get<double>();
  }
  std::string get_string_or(const json& j, const std::string& field,
                            const std::string& dflt) const {
    return j.contains(field) ? get_string(j, field) : dflt;
  }
  std::string get_string(const json& j, const std::string& field) const {
    const json& v = at(j, field);
    if (!v.is_string()) fail(field, "must be a string");
    return v.get<std::string>();
  }
};

std::vector<int32_t> int_list(const Ctx& c, const json& v, const std::string& field) {
  if (!v.is_array()) c.fail(field, "must be an array of integers");
  std::vector<int32_t> out;
  for (const json& x : v) {
    if (!x.is_number_integer()) c.fail(field, "must be an array of integers");
    const std::optional<int32_t> v = json_integer<int32_t>(x);
    if (!v) c.fail(field, "integer out of range (int32)");
    out.push_back(*v);
  }
  return out;
}

void read_header(const Ctx& c, const json& j, StepTraceFile& t) {
  if (c.get_string(j, "schema") != "moesim.step_trace.v1") {
    c.fail("schema", "expected \"moesim.step_trace.v1\"");
  }
  t.scenario = c.get_string_or(j, "scenario", "");
  t.overlap = c.get_string_or(j, "overlap", "");
  if (!t.overlap.empty() && t.overlap != "none" && t.overlap != "simple" &&
      t.overlap != "two_microbatch" && t.overlap != "decode_pipeline") {
    c.fail("overlap", "unknown overlap '" + t.overlap +
                          "' (valid: none, simple, two_microbatch, decode_pipeline)");
  }
  if (j.contains("comm_sms")) {
    t.comm_sms = static_cast<int32_t>(c.get_int_in(j, "comm_sms", 0, INT32_MAX));
  }
  const json& model = c.at(j, "model");
  if (!model.is_object()) c.fail("model", "must be an object");
  t.model = c.get_string_or(model, "name", "");
  t.num_gpus = static_cast<int32_t>(c.get_int_in(c.at(j, "topology"), "num_gpus", 1, INT32_MAX));
  const json& reps = c.at(j, "replicas");
  if (!reps.is_array()) c.fail("replicas", "must be an array");
  for (const json& r : reps) {
    t.replica_gpus.push_back(int_list(c, c.at(r, "gpus"), "replicas.gpus"));
  }
  if (j.contains("placement")) {
    const json& eg = c.at(j["placement"], "expert_gpus");
    if (!eg.is_array()) c.fail("placement.expert_gpus", "must be an array of arrays");
    for (const json& e : eg) t.expert_gpus.push_back(int_list(c, e, "placement.expert_gpus"));
  }
}

TraceStep read_step(const Ctx& c, const json& j, const StepTraceFile& t) {
  TraceStep s;
  s.step = c.get_int(j, "step");
  s.replica = c.get_int32(j, "replica");
  if (s.replica < 0 || s.replica >= static_cast<int32_t>(t.replica_gpus.size())) {
    c.fail("replica", "no such replica in the header");
  }
  s.start_ns = c.get_int_in(j, "start_ns", 0, kSimTimeMax);
  s.end_ns = c.get_int_in(j, "end_ns", s.start_ns, kSimTimeMax);
  const json& seqs = c.at(j, "sequences");
  if (!seqs.is_array()) c.fail("sequences", "must be an array");
  for (const json& q : seqs) {
    TraceSequence ts;
    ts.request = c.get_int32(q, "request");
    ts.gpu = c.get_int32(q, "gpu");
    std::string phase = c.get_string(q, "phase");
    if (phase != "prefill" && phase != "decode") c.fail("sequences.phase", "prefill or decode");
    ts.prefill = phase == "prefill";
    // Token counts are int32 downstream (batches, count matrices).
    ts.new_tokens = c.get_int(q, "new_tokens");
    ts.context_tokens = c.get_int(q, "context_tokens");
    if (ts.new_tokens < 1 || ts.context_tokens < 0) {
      c.fail("sequences.new_tokens", "new_tokens >= 1 and context_tokens >= 0 required");
    }
    if (ts.new_tokens > INT32_MAX || ts.context_tokens > INT32_MAX - ts.new_tokens) {
      c.fail("sequences.context_tokens",
             "context_tokens + new_tokens must be <= " + std::to_string(INT32_MAX));
    }
    s.sequences.push_back(ts);
  }
  const json& layers = c.at(j, "layers");
  if (!layers.is_array()) c.fail("layers", "must be an array");
  for (const json& l : layers) {
    TraceLayer tl;
    tl.layer_idx = c.get_int32(l, "layer");
    tl.dispatch_bytes = c.get_double(l, "dispatch_bytes");
    tl.combine_bytes = c.get_double(l, "combine_bytes");
    if (!(tl.dispatch_bytes >= 0) || !(tl.combine_bytes >= 0)) {
      c.fail("layers.dispatch_bytes", "dispatch_bytes and combine_bytes must be >= 0");
    }
    const json& r = c.at(l, "routing");
    if (!r.is_array()) c.fail("layers.routing", "must be an array");
    for (const json& e : r) {
      if (!e.is_array() || e.size() != 4)
        c.fail("layers.routing", "entries are [src, expert, dst, count]");
      std::array<int64_t, 4> v{};
      for (size_t k = 0; k < 4; ++k) {
        const std::optional<int32_t> x = json_integer<int32_t>(e[k]);
        if (!e[k].is_number_integer()) c.fail("layers.routing", "entries must be integers");
        if (!x) c.fail("layers.routing", "entries must be integers in int32's range");
        v[k] = *x;
      }
      if (v[3] < 1) c.fail("layers.routing", "count must be >= 1");
      tl.routing.push_back(v);
    }
    s.layers.push_back(std::move(tl));
  }
  return s;
}

TracePlacementChange read_placement(const Ctx& c, const json& j, const StepTraceFile& t) {
  TracePlacementChange p;
  p.step = c.get_int(j, "step");
  if (j.contains("replica")) {
    p.replica = c.get_int32(j, "replica");
    if (p.replica < 0 || p.replica >= static_cast<int32_t>(t.replica_gpus.size())) {
      c.fail("replica", "no such replica in the header");
    }
  }
  if (j.contains("layer")) {
    const int64_t layer = c.get_int(j, "layer");
    if (layer < 0 || layer > INT32_MAX) c.fail("layer", "must be a model layer index");
    p.layer = static_cast<int32_t>(layer);
  }
  const json& eg = c.at(j, "expert_gpus");
  if (!eg.is_array()) c.fail("expert_gpus", "must be an array of arrays");
  for (const json& e : eg) {
    p.expert_gpus.push_back(int_list(c, e, "expert_gpus"));
    for (int32_t g : p.expert_gpus.back()) {
      if (g < 0 || g >= t.num_gpus)
        c.fail("expert_gpus", "GPU " + std::to_string(g) + " out of range");
      if (p.replica >= 0) {
        const std::vector<int32_t>& own = t.replica_gpus[p.replica];
        if (std::find(own.begin(), own.end(), g) == own.end()) {
          c.fail("expert_gpus",
                 "GPU " + std::to_string(g) + " is not in replica " + std::to_string(p.replica));
        }
      }
    }
  }
  if (!t.expert_gpus.empty() && p.expert_gpus.size() != t.expert_gpus.size()) {
    c.fail("expert_gpus", "lists " + std::to_string(p.expert_gpus.size()) +
                              " experts; the header's placement lists " +
                              std::to_string(t.expert_gpus.size()));
  }
  // It applies from its step on: the latest step of its replica read so far must not be later
  // (a replica's steps come in step order).
  for (auto it = t.steps.rbegin(); it != t.steps.rend(); ++it) {
    if (p.replica >= 0 && it->replica != p.replica) continue;
    if (it->step > p.step) {
      c.fail("step", "step " + std::to_string(p.step) + " comes after step " +
                         std::to_string(it->step) + " of its replica");
    }
    break;
  }
  return p;
}

}  // namespace

StepTraceFile read_step_trace(const std::string& path) {
  return read_input_stream(path, InputKind::kData, "cannot open the step trace",
                           [&](std::istream& in) { return read_step_trace(in, path); });
}

StepTraceFile read_step_trace(std::istream& in, const std::string& path) {
  StepTraceFile t;
  t.file = path;
  std::string text;
  int line = 0;
  bool have_header = false;
  while (std::getline(in, text)) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    Ctx c{path, line};
    json j;
    try {
      j = parse_json(text);
    } catch (const JsonDepthError& e) {
      c.fail("", e.what());
    } catch (const json::exception& e) {  // syntax, or a number beyond double (1e400)
      c.fail("", "malformed JSON: " + json_exception_reason(e));
    }
    if (!j.is_object()) c.fail("", "not a JSON object");
    std::string kind = c.get_string(j, "record");
    if (!have_header) {
      if (kind != "header") c.fail("record", "the first record must be the header");
      read_header(c, j, t);
      have_header = true;
    } else if (kind == "step") {
      TraceStep s = read_step(c, j, t);
      // A replica's steps come in step order (docs/schemas/step_trace.md).
      for (auto it = t.steps.rbegin(); it != t.steps.rend(); ++it) {
        if (it->replica != s.replica) continue;
        if (it->step >= s.step) {
          c.fail("step", "step " + std::to_string(s.step) + " comes after step " +
                             std::to_string(it->step) + " of replica " + std::to_string(s.replica) +
                             " (steps come in order)");
        }
        break;
      }
      t.steps.push_back(std::move(s));
    } else if (kind == "placement") {
      t.placement_changes.push_back(read_placement(c, j, t));
    } else {
      c.fail("record", "unknown record kind '" + kind + "'");
    }
  }
  if (!have_header) throw ConfigError(path, 0, 0, "", "empty step trace");
  return t;
}

}  // namespace moesim::sim
