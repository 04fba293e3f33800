#include "sim/calibration/measurement_reader.h"

#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "base/json_number.h"
#include "sim/config/config_error.h"
#include "sim/config/input_files.h"

namespace moesim::sim {
namespace {

using nlohmann::json;

class RecordReader {
 public:
  RecordReader(const std::string& file, int line, const json& j)
      : file_(file), line_(line), j_(j) {}

  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    throw ConfigError(file_, line_, 0, field, reason);
  }
  const json& at(const std::string& field) const {
    auto it = j_.find(field);
    if (it == j_.end()) fail(field, "missing");
    return *it;
  }
  int64_t get_int(const std::string& field) const {
    const json& v = at(field);
    if (!v.is_number_integer()) fail(field, "must be an integer");
    const std::optional<int64_t> x = json_integer<int64_t>(v);
    if (!x) fail(field, "integer out of range (int64)");
    return *x;
  }
  // get_int() for int32 fields: a value outside int32 is an error, never wrapped.
  int32_t get_int32(const std::string& field) const { return narrow32(field, get_int(field)); }
  int32_t get_int32_or(const std::string& field, int32_t dflt) const {
    return narrow32(field, get_int_or(field, dflt));
  }
  int32_t narrow32(const std::string& field, int64_t v) const {
    const std::optional<int32_t> x = checked_narrow<int32_t>(v);
    if (!x) fail(field, "integer out of range (int32)");
    return *x;
  }
  int64_t get_int_or(const std::string& field, int64_t dflt) const {
    return j_.contains(field) && !j_[field].is_null() ? get_int(field) : dflt;
  }
  double get_double(const std::string& field) const {
    const json& v = at(field);
    if (!v.is_number()) fail(field, "must be a number");
    return v.get<double>();
  }
  double get_double_or(const std::string& field, double dflt) const {
    return j_.contains(field) && !j_[field].is_null() ? get_double(field) : dflt;
  }
  std::string get_string(const std::string& field) const {
    const json& v = at(field);
    if (!v.is_string()) fail(field, "must be a string");
    return v.get<std::string>();
  }
  std::string get_string_or(const std::string& field, const std::string& dflt) const {
    return j_.contains(field) && !j_[field].is_null() ? get_string(field) : dflt;
  }
  bool get_bool(const std::string& field) const {
    const json& v = at(field);
    if (!v.is_boolean()) fail(field, "must be true or false");
    return v.get<bool>();
  }
  const json& raw() const { return j_; }

 private:
  const std::string& file_;
  int line_;
  const json& j_;
};

void read_header(const RecordReader& r, MeasurementSet& m) {
  if (r.get_string("schema") != "moesim.measurements.v1") {
    r.fail("schema", "expected \"moesim.measurements.v1\"");
  }
  m.mode = r.get_string("mode");
  m.backend = r.get_string_or("backend", "");
  m.device = r.get_string_or("device", "");
  m.trace_file = r.get_string_or("trace_file", "");
  m.scenario = r.get_string_or("scenario", "");
  m.model = r.get_string_or("model", "");
  m.replay_profile = r.get_string_or("replay_profile", "");
  m.repeats = r.get_int_or("repeats", 0);
  if (r.raw().contains("sim_gpus")) {
    const json& g = r.at("sim_gpus");
    if (!g.is_array()) r.fail("sim_gpus", "must be an array");
    for (const json& v : g) {
      const std::optional<int32_t> g32 = json_integer<int32_t>(v);
      if (!g32) r.fail("sim_gpus", "must hold integers in int32's range");
      m.sim_gpus.push_back(*g32);
    }
  }
  if (r.raw().contains("layers_run")) {
    const json& layers = r.at("layers_run");
    if (!layers.is_array()) r.fail("layers_run", "must be an array");
    for (const json& l : layers) {
      if (!l.is_object() || !l.contains("layer") || !l.contains("scale") ||
          !json_integer<int32_t>(l["layer"]) || !json_integer<int32_t>(l["scale"])) {
        r.fail("layers_run", "entries must be {\"layer\": int, \"scale\": int} (int32)");
      }
      m.layer_scales[*json_integer<int32_t>(l["layer"])] = *json_integer<int32_t>(l["scale"]);
    }
  }
}

// The optional timing fields of a measured op record (docs/schemas/measurement.md).
void read_timing_detail(const RecordReader& r, OpSample& s) {
  s.estimator = r.get_string_or("estimator", "");
  if (!s.estimator.empty() && s.estimator != "min" && s.estimator != "median" &&
      s.estimator != "trimmed_mean") {
    r.fail("estimator",
           "unknown estimator '" + s.estimator + "' (valid: min, median, trimmed_mean)");
  }
  s.wait_ns = r.get_int_or("wait_ns", -1);
  if (r.raw().contains("wait_ns") && !r.raw()["wait_ns"].is_null() && s.wait_ns < 0) {
    r.fail("wait_ns", "must be >= 0 or null");
  }
  if (r.raw().contains("noisy")) s.noisy = r.get_bool("noisy");
  s.retries = r.get_int_or("retries", 0);
  if (s.retries < 0) r.fail("retries", "must be >= 0");
  for (const char* field : {"samples_ns", "samples_wait_ns"}) {
    if (!r.raw().contains(field)) continue;
    const json& a = r.at(field);
    if (!a.is_array()) r.fail(field, "must be an array");
    for (const json& v : a) {
      const std::optional<int64_t> x = json_integer<int64_t>(v);
      if (!x || *x < 0) r.fail(field, "must hold integers >= 0 (nanoseconds)");
    }
  }
}

OpSample read_op(const RecordReader& r) {
  OpSample s;
  s.step = r.get_int("step");
  s.replica = r.get_int32("replica");
  s.sim_gpu = r.get_int32("sim_gpu");
  s.layer_idx = r.get_int32("layer");
  s.layer_scale = r.get_int32_or("layer_scale", 1);
  if (s.layer_scale < 1) r.fail("layer_scale", "must be >= 1");
  s.op = r.get_string("op");
  s.dtype = r.get_string_or("dtype", "bf16");
  s.tokens = r.get_int("tokens");
  s.context_tokens_sum = r.get_int_or("context_tokens_sum", 0);
  s.context_tokens_max = r.get_int_or("context_tokens_max", 0);
  s.num_sequences = r.get_int_or("num_sequences", 0);
  s.flops = r.get_double("flops");
  s.weight_bytes = r.get_double_or("weight_bytes", 0);
  s.activation_bytes = r.get_double_or("activation_bytes", 0);
  s.kv_bytes = r.get_double_or("kv_bytes", 0);
  s.bytes = r.get_double("bytes");
  s.measured = r.get_bool("measured");
  if (s.measured) {
    s.measured_ns = r.get_int("measured_ns");
    s.min_ns = r.get_int_or("min_ns", s.measured_ns);
    s.max_ns = r.get_int_or("max_ns", s.measured_ns);
    if (s.measured_ns < 0) r.fail("measured_ns", "must be >= 0");
    read_timing_detail(r, s);
  }
  if (r.raw().contains("tokens_per_expert")) {
    const json& t = r.at("tokens_per_expert");
    if (!t.is_array()) r.fail("tokens_per_expert", "must be an array");
    for (const json& n : t) {
      const std::optional<int64_t> n64 = json_integer<int64_t>(n);
      if (!n64) r.fail("tokens_per_expert", "must hold integers in int64's range");
      if (*n64 > 0) ++s.num_active_experts;
    }
  }
  return s;
}

OpSample read_bench(const RecordReader& r) {
  OpSample s;
  s.step = -1;
  s.op = r.get_string("op");
  s.dtype = r.get_string_or("dtype", "bf16");
  s.tokens = r.get_int("tokens");
  s.context_tokens_max = r.get_int_or("context_tokens", 0);
  s.flops = r.get_double("flops");
  s.bytes = r.get_double("bytes");
  s.measured = true;
  s.measured_ns = r.get_int("measured_ns");
  s.min_ns = r.get_int_or("min_ns", s.measured_ns);
  s.max_ns = r.get_int_or("max_ns", s.measured_ns);
  return s;
}

// A timed kernel's `measured_ns` (> 0), in seconds.
double read_measured_s(const RecordReader& r) {
  const int64_t ns = r.get_int("measured_ns");
  if (ns <= 0) r.fail("measured_ns", "must be > 0");
  return 1e-9 * static_cast<double>(ns);
}

CollectiveSample read_collective(const RecordReader& r, const std::string& file) {
  CollectiveSample c;
  c.source = file;
  const std::string op = r.get_string("op");
  if (op != "alltoall") r.fail("op", "unknown collective '" + op + "' (valid: alltoall)");
  c.ep_size = r.get_int32("ep_size");
  if (c.ep_size < 2) r.fail("ep_size", "must be >= 2");
  c.bytes_per_gpu = r.get_double("bytes_per_gpu");
  if (!(c.bytes_per_gpu > 0)) r.fail("bytes_per_gpu", "must be > 0");
  c.measured_s = read_measured_s(r);
  c.kernel = r.get_string_or("kernel", "");
  if (!c.kernel.empty()) {
    if (c.kernel != kLowLatencyDispatchKernel && c.kernel != kLowLatencyCombineKernel) {
      r.fail("kernel", "unknown kernel '" + c.kernel + "' (valid: " + kLowLatencyDispatchKernel +
                           ", " + kLowLatencyCombineKernel + ")");
    }
  }
  if (r.raw().contains("transport")) {
    const std::string transport = r.get_string("transport");
    if (c.kernel.empty()) r.fail("transport", "needs a low-latency \"kernel\"");
    if (transport != "nvlink" && transport != "rdma") {
      r.fail("transport", "unknown transport '" + transport + "' (valid: nvlink, rdma)");
    }
    c.rdma = transport == "rdma";
  }
  return c;
}

GemmSample read_gemm(const RecordReader& r) {
  GemmSample g;
  g.layout = r.get_string("layout");
  if (g.layout != "contiguous_grouped" && g.layout != "masked_grouped" && g.layout != "dense") {
    r.fail("layout", "unknown GEMM layout '" + g.layout +
                         "' (valid: contiguous_grouped, masked_grouped, dense)");
  }
  g.dtype = r.get_string("dtype");
  if (g.dtype != "fp8" && g.dtype != "bf16") r.fail("dtype", "must be fp8 or bf16");
  g.num_groups = r.get_int("num_groups");
  g.m_per_group = r.get_int("m_per_group");
  g.n = r.get_int("n");
  g.k = r.get_int("k");
  if (g.num_groups < 1) r.fail("num_groups", "must be >= 1");
  if (g.layout == "dense" && g.num_groups != 1) r.fail("num_groups", "must be 1 for dense");
  if (g.m_per_group < 1) r.fail("m_per_group", "must be >= 1");
  if (g.n < 1) r.fail("n", "must be >= 1");
  if (g.k < 1) r.fail("k", "must be >= 1");
  g.measured_s = read_measured_s(r);
  return g;
}

AttentionCoreSample read_attention_core(const RecordReader& r) {
  AttentionCoreSample a;
  a.op = r.get_string("op");
  if (a.op.rfind("attn_", 0) != 0) r.fail("op", "must be an attention op kind (attn_...)");
  a.dtype = r.get_string("dtype");
  if (a.dtype != "fp8" && a.dtype != "bf16") r.fail("dtype", "must be fp8 or bf16");
  a.bound = r.get_string("bound");
  if (a.bound != "memory" && a.bound != "compute") r.fail("bound", "must be memory or compute");
  a.flops = r.get_double("flops");
  a.bytes = r.get_double("bytes");
  if (!(a.flops > 0)) r.fail("flops", "must be > 0");
  if (!(a.bytes > 0)) r.fail("bytes", "must be > 0");
  a.queries = r.get_double_or("queries", 0);
  a.pairs = r.get_double_or("pairs", 0);
  if (!(a.queries >= 0)) r.fail("queries", "must be >= 0");
  if ((a.queries > 0) != (a.pairs > 0)) r.fail("pairs", "queries and pairs go together (> 0)");
  if (a.pairs > 0 && a.pairs < a.queries) r.fail("pairs", "must be >= queries (a query attends)");
  a.measured_s = read_measured_s(r);
  return a;
}

StepSample read_step(const RecordReader& r) {
  StepSample s;
  s.step = r.get_int("step");
  s.replica = r.get_int32("replica");
  s.sim_gpu = r.get_int32("sim_gpu");
  s.num_ops = r.get_int_or("num_ops", 0);
  s.num_not_measured = r.get_int_or("num_not_measured", 0);
  s.measured_ns_sum = r.get_int("measured_ns_sum");
  s.scaled_ns_sum = r.get_int("scaled_ns_sum");
  s.sim_step_ns = r.get_int_or("sim_step_ns", 0);
  return s;
}

}  // namespace

MeasurementSet read_measurements(const std::string& path) {
  return read_input_stream(path, InputKind::kData, "cannot open the measurement file",
                           [&](std::istream& in) { return read_measurements(in, path); });
}

MeasurementSet read_measurements(std::istream& in, const std::string& path) {
  MeasurementSet m;
  m.file = path;
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = parse_json(text);
    } catch (const JsonDepthError& e) {
      throw ConfigError(path, line, 0, "", e.what());
    } catch (const json::exception& e) {  // syntax, or a number beyond double (1e400)
      throw ConfigError(path, line, 0, "", "malformed JSON: " + json_exception_reason(e));
    }
    if (!j.is_object()) {
      throw ConfigError(path, line, 0, "", "not a JSON object");
    }
    RecordReader r(path, line, j);
    std::string kind = r.get_string("record");
    if (line == 1 || m.mode.empty()) {
      if (kind != "header") r.fail("record", "the first record must be the header");
      read_header(r, m);
    } else if (kind == "op") {
      m.ops.push_back(read_op(r));
    } else if (kind == "step") {
      m.steps.push_back(read_step(r));
    } else if (kind == "bench") {
      m.ops.push_back(read_bench(r));
    } else if (kind == "collective") {
      m.collectives.push_back(read_collective(r, path));
    } else if (kind == "gemm") {
      m.gemms.push_back(read_gemm(r));
    } else if (kind == "attention_core") {
      m.attention_cores.push_back(read_attention_core(r));
    } else {
      r.fail("record", "unknown record kind '" + kind +
                           "' (valid: header, op, step, bench, collective, gemm, "
                           "attention_core)");
    }
  }
  if (m.mode.empty()) throw ConfigError(path, 0, 0, "", "empty measurement file");
  return m;
}

}  // namespace moesim::sim
