#include "sim/routing/routing_trace.h"

#include <istream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "base/check.h"
#include "base/json_depth.h"
#include "base/json_number.h"
#include "sim/config/config_error.h"
#include "sim/config/input_files.h"

namespace moesim::sim {
namespace {

using nlohmann::json;

class LineReader {
 public:
  LineReader(const std::string& file, int line) : file_(file), line_(line) {}

  [[noreturn]] void fail(const std::string& key, const std::string& reason) const {
    throw ConfigError(file_, line_, 0, key, reason);
  }

  const json& member(const json& obj, const std::string& key) const {
    const auto it = obj.find(key);
    if (it == obj.end()) fail(key, "missing required key");
    return *it;
  }

  int64_t integer(const json& v, const std::string& key, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) fail(key, "expected an integer");
    const std::optional<int64_t> checked = json_integer<int64_t>(v);
    if (!checked) {
      fail(key, "value " + v.dump() + " is out of range [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
    }
    const int64_t x = *checked;
    if (x < lo || x > hi) {
      fail(key, "value " + std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
    }
    return x;
  }

  const json& array(const json& v, const std::string& key, size_t size) const {
    if (!v.is_array()) fail(key, "expected an array");
    if (size != 0 && v.size() != size) {
      fail(key, "expected " + std::to_string(size) + " elements, got " + std::to_string(v.size()));
    }
    return v;
  }

 private:
  const std::string& file_;
  int line_;
};

RoutingTraceHeader parse_header(const json& j, const LineReader& r) {
  if (!j.is_object()) r.fail("", "expected a JSON object (the trace header)");
  const json& format = r.member(j, "format");
  if (!format.is_string() || format.get<std::string>() != kRoutingTraceFormat) {
    r.fail("format", std::string("expected \"") + kRoutingTraceFormat + "\"");
  }
  r.integer(r.member(j, "version"), "version", kRoutingTraceVersion, kRoutingTraceVersion);
  RoutingTraceHeader h;
  constexpr int64_t kMax = 1 << 24;
  h.num_moe_layers =
      static_cast<int32_t>(r.integer(r.member(j, "num_moe_layers"), "num_moe_layers", 1, kMax));
  h.num_experts =
      static_cast<int32_t>(r.integer(r.member(j, "num_experts"), "num_experts", 1, kMax));
  h.num_src_gpus =
      static_cast<int32_t>(r.integer(r.member(j, "num_src_gpus"), "num_src_gpus", 1, kMax));
  h.top_k = static_cast<int32_t>(r.integer(r.member(j, "top_k"), "top_k", 1, h.num_experts));
  for (const auto& [key, value] : j.items()) {
    if (key != "format" && key != "version" && key != "num_moe_layers" && key != "num_experts" &&
        key != "num_src_gpus" && key != "top_k") {
      r.fail(key, "unknown key '" + key + "'");
    }
  }
  return h;
}

void parse_record(const json& j, const LineReader& r, const RoutingTraceHeader& h,
                  int64_t expected_step, int32_t expected_layer, CountMatrix& out) {
  if (!j.is_object()) r.fail("", "expected a JSON object (a step record)");
  const int64_t step = r.integer(r.member(j, "step"), "step", 0, INT64_MAX);
  const int64_t layer = r.integer(r.member(j, "layer"), "layer", 0, h.num_moe_layers - 1);
  if (step != expected_step || layer != expected_layer) {
    r.fail("step", "expected step " + std::to_string(expected_step) + " layer " +
                       std::to_string(expected_layer) + " (records in order, every layer of " +
                       "every step), got step " + std::to_string(step) + " layer " +
                       std::to_string(layer));
  }
  const json& tokens_json = r.array(r.member(j, "tokens"), "tokens", h.num_src_gpus);
  std::vector<int64_t> tokens(h.num_src_gpus);
  for (int32_t s = 0; s < h.num_src_gpus; ++s) {
    tokens[s] = r.integer(tokens_json[s], "tokens[" + std::to_string(s) + "]", 0, INT32_MAX);
  }
  out.reset(h.num_src_gpus, h.num_experts);
  const bool has_dense = j.contains("dense");
  const bool has_sparse = j.contains("sparse");
  if (has_dense == has_sparse) r.fail("dense", "expected exactly one of 'dense' and 'sparse'");
  for (const auto& [key, value] : j.items()) {
    if (key != "step" && key != "layer" && key != "tokens" && key != "dense" && key != "sparse") {
      r.fail(key, "unknown key '" + key + "'");
    }
  }
  if (has_dense) {
    const json& rows = r.array(j["dense"], "dense", h.num_src_gpus);
    for (int32_t s = 0; s < h.num_src_gpus; ++s) {
      const std::string key = "dense[" + std::to_string(s) + "]";
      const json& row = r.array(rows[s], key, h.num_experts);
      for (int32_t e = 0; e < h.num_experts; ++e) {
        out.at(s, e) = static_cast<int32_t>(
            r.integer(row[e], key + "[" + std::to_string(e) + "]", 0, tokens[s]));
      }
    }
  } else {
    const json& cells = r.array(j["sparse"], "sparse", 0);
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string key = "sparse[" + std::to_string(i) + "]";
      const json& cell = r.array(cells[i], key, 3);
      const auto s = static_cast<int32_t>(r.integer(cell[0], key + "[0]", 0, h.num_src_gpus - 1));
      const auto e = static_cast<int32_t>(r.integer(cell[1], key + "[1]", 0, h.num_experts - 1));
      const int64_t c = r.integer(cell[2], key + "[2]", 1, tokens[s]);
      if (out.at(s, e) != 0) {
        r.fail(key,
               "duplicate cell (src " + std::to_string(s) + ", expert " + std::to_string(e) + ")");
      }
      out.at(s, e) = static_cast<int32_t>(c);
    }
  }
  for (int32_t s = 0; s < h.num_src_gpus; ++s) {
    const int64_t sum = out.row_sum(s);
    if (sum != tokens[s] * h.top_k) {
      r.fail(has_dense ? "dense" : "sparse",
             "source " + std::to_string(s) + " has " + std::to_string(sum) +
                 " selections, expected tokens * top_k = " + std::to_string(tokens[s] * h.top_k));
    }
  }
}

}  // namespace

RoutingTrace read_routing_trace(std::istream& in, const std::string& file_name) {
  RoutingTrace trace;
  trace.file = file_name;
  std::string text;
  int line_no = 0;
  bool have_header = false;
  int32_t next_layer = 0;
  while (std::getline(in, text)) {
    ++line_no;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const LineReader r(file_name, line_no);
    json j;
    try {
      j = parse_json(text);
    } catch (const JsonDepthError& e) {
      r.fail("", std::string("malformed JSON: ") + e.what());
    } catch (const json::parse_error& e) {
      r.fail("", std::string("malformed JSON: ") + e.what());
    } catch (const json::out_of_range& e) {
      r.fail("", "malformed JSON: " + json_exception_reason(e));
    }
    if (!have_header) {
      trace.header = parse_header(j, r);
      have_header = true;
      continue;
    }
    CountMatrix counts;
    parse_record(j, r, trace.header, trace.num_steps, next_layer, counts);
    trace.counts.push_back(std::move(counts));
    if (++next_layer == trace.header.num_moe_layers) {
      next_layer = 0;
      ++trace.num_steps;
    }
  }
  if (!have_header) throw ConfigError(file_name, line_no, 0, "", "empty trace: no header line");
  if (next_layer != 0) {
    throw ConfigError(file_name, line_no, 0, "layer",
                      "trace ends inside step " + std::to_string(trace.num_steps) + ": layers " +
                          std::to_string(next_layer) + ".." +
                          std::to_string(trace.header.num_moe_layers - 1) + " are missing");
  }
  if (trace.num_steps == 0) {
    throw ConfigError(file_name, line_no, 0, "", "trace has a header but no step records");
  }
  return trace;
}

RoutingTrace load_routing_trace(const std::string& path) {
  return read_input_stream(path, InputKind::kData, "cannot open routing trace",
                           [&](std::istream& in) { return read_routing_trace(in, path); });
}

RoutingTraceWriter::RoutingTraceWriter(std::ostream& out, const RoutingTraceHeader& header)
    : out_(out), header_(header) {
  out_ << "{\"format\":\"" << kRoutingTraceFormat << "\",\"version\":" << kRoutingTraceVersion
       << ",\"num_moe_layers\":" << header.num_moe_layers
       << ",\"num_experts\":" << header.num_experts << ",\"num_src_gpus\":" << header.num_src_gpus
       << ",\"top_k\":" << header.top_k << "}\n";
}

void RoutingTraceWriter::write(int64_t step_idx, int32_t moe_layer_idx,
                               const CountMatrix& src_expert) {
  MOESIM_CHECK(step_idx == num_records_ / header_.num_moe_layers &&
                   moe_layer_idx == num_records_ % header_.num_moe_layers,
               "trace records must come in (step, layer) order");
  MOESIM_CHECK(
      src_expert.num_rows() == header_.num_src_gpus && src_expert.num_cols() == header_.num_experts,
      "counts shape must match the trace header");
  ++num_records_;
  out_ << "{\"step\":" << step_idx << ",\"layer\":" << moe_layer_idx << ",\"tokens\":[";
  int64_t num_nonzero = 0;
  for (int32_t s = 0; s < header_.num_src_gpus; ++s) {
    const int64_t sum = src_expert.row_sum(s);
    MOESIM_CHECK(sum % header_.top_k == 0, "rows must be whole tokens");
    out_ << (s ? "," : "") << sum / header_.top_k;
    for (int32_t c : src_expert.row(s)) num_nonzero += c != 0 ? 1 : 0;
  }
  out_ << "]";
  const int64_t num_cells = static_cast<int64_t>(header_.num_src_gpus) * header_.num_experts;
  if (3 * num_nonzero < num_cells) {
    out_ << ",\"sparse\":[";
    bool first = true;
    for (int32_t s = 0; s < header_.num_src_gpus; ++s) {
      const std::span<const int32_t> row = src_expert.row(s);
      for (int32_t e = 0; e < header_.num_experts; ++e) {
        if (row[e] == 0) continue;
        out_ << (first ? "" : ",") << "[" << s << "," << e << "," << row[e] << "]";
        first = false;
      }
    }
  } else {
    out_ << ",\"dense\":[";
    for (int32_t s = 0; s < header_.num_src_gpus; ++s) {
      out_ << (s ? ",[" : "[");
      const std::span<const int32_t> row = src_expert.row(s);
      for (int32_t e = 0; e < header_.num_experts; ++e) out_ << (e ? "," : "") << row[e];
      out_ << "]";
    }
  }
  out_ << "]}\n";
}

void RecordingRoutingModel::route(const RoutingQuery& query, CountMatrix& out) {
  inner_.route(query, out);
  writer_.write(query.step_idx, query.moe_layer_idx, out);
}

}  // namespace moesim::sim
