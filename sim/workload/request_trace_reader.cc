#include "sim/workload/request_trace_reader.h"

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "base/json_depth.h"
#include "base/json_number.h"
#include "sim/config/config_error.h"
#include "sim/config/input_files.h"
#include "sim/core/horizon.h"
#include "sim/workload/jsonl_text.h"

namespace moesim::sim {
namespace {

using nlohmann::json;

constexpr const char* kSchema = "moesim.request_trace.v1";
// The header's keys (docs/schemas/request_trace.md); the reader uses model.name only.
constexpr std::array<const char*, 19> kHeaderKeys = {
    "record",   "schema",   "moesim_version", "scenario",
    "seed",     "overlap",  "comm_sms",       "model",
    "topology", "replicas", "placement",      "scheduler",
    "router",   "pools",    "admission",      "unsupported_policies",
    "routing",  "slo",      "duration_ns"};
constexpr std::array<const char*, 9> kRequestKeys = {
    "record",     "request_id", "arrival_ns", "prompt_tokens", "output_tokens",
    "session_id", "turn_idx",   "domain",     "prefix_blocks"};

template <size_t N>
std::string key_list(const std::array<const char*, N>& keys) {
  std::string out;
  for (const char* k : keys) out += std::string(out.empty() ? "" : ", ") + k;
  return out;
}

class LineParser {
 public:
  LineParser(const std::string& file, int line) : file_(file), line_(line) {}

  [[noreturn]] void fail(const std::string& key, const std::string& reason, int column = 0) const {
    throw ConfigError(file_, line_, column, key, reason);
  }

  json object(const std::string& text) const {
    if (text.find_first_not_of(" \t") == std::string::npos) fail("", "empty line");
    json row;
    try {
      row = parse_json(text);
    } catch (const JsonDepthError& e) {
      fail("", std::string("invalid JSON: ") + e.what());
    } catch (const json::parse_error& e) {
      fail("", "invalid JSON: " + json_parse_reason(e), static_cast<int>(e.byte));
    } catch (const json::out_of_range& e) {
      fail("", "invalid JSON: " + json_exception_reason(e));
    }
    if (!row.is_object()) fail("", "expected a JSON object, got " + json_type_name(row));
    return row;
  }

  template <size_t N>
  void only_keys(const json& row, const std::array<const char*, N>& keys) const {
    for (const auto& item : row.items()) {
      const std::string& key = item.key();
      if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; })) {
        fail(key, "unknown key (valid: " + key_list(keys) + ")");
      }
    }
  }

  // An integer in [lo, hi]; `fallback` when the key is absent and optional.
  int64_t integer(const json& row, const char* key, int64_t lo, int64_t hi,
                  std::optional<int64_t> fallback = std::nullopt) const {
    auto it = row.find(key);
    if (it == row.end()) {
      if (fallback) return *fallback;
      fail(key, "missing key");
    }
    const std::optional<int64_t> x = json_integer<int64_t>(*it);
    if (!it->is_number_integer()) fail(key, "expected an integer, got " + json_type_name(*it));
    if (!x || *x < lo || *x > hi) {
      fail(key, "value " + it->dump() + " is outside [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
    }
    return *x;
  }

  Domain domain(const json& row) const {
    auto it = row.find("domain");
    if (it == row.end()) return Domain::kChat;
    if (!it->is_string()) fail("domain", "expected a string, got " + json_type_name(*it));
    const std::string name = it->get<std::string>();
    for (int d = 0; d < kNumDomains; ++d) {
      if (name == domain_name(static_cast<Domain>(d))) return static_cast<Domain>(d);
    }
    fail("domain", "unknown domain \"" + name + "\" (valid: code, math, chat, multilingual)");
  }

  std::vector<uint64_t> prefix_blocks(const json& v, int64_t prompt_tokens) const {
    if (!v.is_array()) fail("prefix_blocks", "expected an array, got " + json_type_name(v));
    std::vector<uint64_t> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const std::optional<uint64_t> h = json_integer<uint64_t>(v[i]);
      if (!h) {
        fail("prefix_blocks[" + std::to_string(i) + "]",
             "expected an integer >= 0, got " +
                 (v[i].is_number() ? v[i].dump() : json_type_name(v[i])));
      }
      out.push_back(*h);
    }
    const int64_t want = num_prefix_blocks(prompt_tokens);
    if (static_cast<int64_t>(out.size()) != want) {
      fail("prefix_blocks", "has " + std::to_string(out.size()) + " blocks but prompt_tokens " +
                                std::to_string(prompt_tokens) + " needs " + std::to_string(want) +
                                " (" + std::to_string(kPrefixBlockTokens) + "-token blocks)");
    }
    return out;
  }

 private:
  const std::string& file_;
  int line_;
};

std::string read_header(const LineParser& p, const json& h) {
  p.only_keys(h, kHeaderKeys);
  auto record = h.find("record");
  if (record == h.end() || *record != "header") {
    p.fail("record", "line 1 must be the header (\"record\": \"header\")");
  }
  auto schema = h.find("schema");
  if (schema == h.end() || *schema != kSchema) {
    p.fail("schema", std::string("expected \"") + kSchema + "\", got " +
                         (schema == h.end() ? std::string("none") : schema->dump()));
  }
  auto model = h.find("model");
  if (model == h.end() || !model->is_object()) p.fail("model", "missing model object");
  auto name = model->find("name");
  if (name == model->end() || !name->is_string()) p.fail("model.name", "missing model name");
  return name->get<std::string>();
}

RequestTraceRow read_row(const LineParser& p, const json& row, int line) {
  p.only_keys(row, kRequestKeys);
  auto record = row.find("record");
  if (record == row.end() || *record != "request") {
    p.fail("record", "expected \"request\", got " +
                         (record == row.end() ? std::string("none") : record->dump()));
  }
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  RequestTraceRow r;
  r.line = line;
  r.request_id = static_cast<int32_t>(p.integer(row, "request_id", 0, kInt32Max - 1));
  r.arrival_ns = p.integer(row, "arrival_ns", 0, kHorizonNs);
  r.prompt_tokens = p.integer(row, "prompt_tokens", 1, kInt64Max);
  r.output_tokens = p.integer(row, "output_tokens", 1, kInt64Max);
  r.session_id = static_cast<int32_t>(p.integer(row, "session_id", -1, kInt32Max - 1, -1));
  r.turn_idx = static_cast<int32_t>(p.integer(row, "turn_idx", 0, kInt32Max - 1, 0));
  r.domain = p.domain(row);
  if (auto it = row.find("prefix_blocks"); it != row.end()) {
    r.has_prefix_blocks = true;
    r.prefix_blocks = p.prefix_blocks(*it, r.prompt_tokens);
  }
  return r;
}

}  // namespace

RequestTraceFile read_request_trace(std::istream& in, const std::string& name) {
  RequestTraceFile file;
  std::unordered_set<int32_t> ids;
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    const LineParser p(name, line);
    const json row = p.object(text);
    if (line == 1) {
      file.model_name = read_header(p, row);
      continue;
    }
    RequestTraceRow r = read_row(p, row, line);
    if (!file.rows.empty() && r.arrival_ns < file.rows.back().arrival_ns) {
      p.fail("arrival_ns", "arrival_ns " + std::to_string(r.arrival_ns) +
                               " is earlier than the previous row's " +
                               std::to_string(file.rows.back().arrival_ns) + " (line " +
                               std::to_string(file.rows.back().line) + ")");
    }
    if (!ids.insert(r.request_id).second) {
      p.fail("request_id", "request_id " + std::to_string(r.request_id) + " appears twice");
    }
    for (uint64_t h : r.prefix_blocks) {
      if (h == std::numeric_limits<uint64_t>::max()) {
        p.fail("prefix_blocks", "hash 18446744073709551615 is reserved (no fresh hash above it)");
      }
      file.hash_bound = std::max(file.hash_bound, h + 1);
    }
    file.rows.push_back(std::move(r));
  }
  if (line == 0) throw ConfigError(name, 0, 0, "", "empty file: no request trace header");
  return file;
}

RequestTraceFile read_request_trace(const std::string& path) {
  return read_input_stream(path, InputKind::kData, "cannot open request trace",
                           [&](std::istream& in) { return read_request_trace(in, path); });
}

}  // namespace moesim::sim
