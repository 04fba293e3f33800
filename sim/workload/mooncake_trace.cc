#include "sim/workload/mooncake_trace.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "base/json_number.h"
#include "sim/config/config_error.h"
#include "sim/config/input_files.h"
#include "sim/workload/jsonl_text.h"

namespace moesim::sim {
namespace {

using nlohmann::json;

// Largest timestamp (ms) whose nanosecond value fits in SimTime with room to spare.
constexpr double kMaxTimestampMs = 1e12;

class LineParser {
 public:
  LineParser(const std::string& file, int line) : file_(file), line_(line) {}

  [[noreturn]] void fail(const std::string& key, const std::string& reason, int column = 0) const {
    throw ConfigError(file_, line_, column, key, reason);
  }

  const json& field(const json& row, const char* key) const {
    auto it = row.find(key);
    if (it == row.end()) fail(key, "missing key");
    return *it;
  }

  int64_t positive_int(const json& row, const char* key) const {
    const json& v = field(row, key);
    if (!v.is_number_integer()) fail(key, "expected an integer, got " + json_type_name(v));
    const std::optional<int64_t> x = json_integer<int64_t>(v);
    if (!x) fail(key, "value " + v.dump() + " is too large");
    if (*x < 1) fail(key, "must be >= 1 (got " + v.dump() + ")");
    return *x;
  }

  SimTime timestamp_ns(const json& row) const {
    const json& v = field(row, "timestamp");
    if (!v.is_number()) fail("timestamp", "expected a number, got " + json_type_name(v));
    const double ms = v.get<double>();
    if (ms < 0.0) fail("timestamp", "must be >= 0 ms (got " + v.dump() + ")");
    if (!(ms <= kMaxTimestampMs)) fail("timestamp", "value " + v.dump() + " ms is too large");
    if (v.is_number_integer()) return v.get<int64_t>() * kNsPerMs;
    return static_cast<SimTime>(std::llround(ms * static_cast<double>(kNsPerMs)));
  }

  std::vector<uint64_t> hash_ids(const json& row, int64_t input_tokens) const {
    const json& v = field(row, "hash_ids");
    if (!v.is_array()) fail("hash_ids", "expected an array, got " + json_type_name(v));
    std::vector<uint64_t> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const json& h = v[i];
      if (!h.is_number_integer() || (!h.is_number_unsigned() && h.get<int64_t>() < 0)) {
        fail("hash_ids[" + std::to_string(i) + "]",
             "expected an integer >= 0, got " + (h.is_number() ? h.dump() : json_type_name(h)));
      }
      out.push_back(h.get<uint64_t>());
    }
    // Rounded up without overflow (input_tokens may be INT64_MAX).
    const int64_t want = input_tokens / 512 + (input_tokens % 512 != 0 ? 1 : 0);
    if (static_cast<int64_t>(out.size()) != want) {
      fail("hash_ids", "has " + std::to_string(out.size()) + " blocks but input_length " +
                           std::to_string(input_tokens) + " needs " + std::to_string(want) +
                           " (512-token blocks)");
    }
    return out;
  }

 private:
  const std::string& file_;
  int line_;
};

}  // namespace

std::vector<TraceRecord> read_mooncake_trace(std::istream& in, const std::string& name) {
  std::vector<TraceRecord> records;
  std::string text;
  std::string previous_timestamp;  // as written in the previous row
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    const LineParser p(name, line);
    if (text.find_first_not_of(" \t") == std::string::npos) p.fail("", "empty line");
    json row;
    try {
      row = parse_json(text);
    } catch (const JsonDepthError& e) {
      p.fail("", std::string("invalid JSON: ") + e.what());
    } catch (const json::parse_error& e) {
      p.fail("", "invalid JSON: " + json_parse_reason(e), static_cast<int>(e.byte));
    } catch (const json::out_of_range& e) {
      p.fail("", "invalid JSON: " + json_exception_reason(e));
    }
    if (!row.is_object()) p.fail("", "expected a JSON object, got " + json_type_name(row));
    TraceRecord r;
    r.line = line;
    r.timestamp_ns = p.timestamp_ns(row);
    r.input_tokens = p.positive_int(row, "input_length");
    r.output_tokens = p.positive_int(row, "output_length");
    r.hash_ids = p.hash_ids(row, r.input_tokens);
    std::string timestamp = row["timestamp"].dump();
    if (!records.empty() && r.timestamp_ns < records.back().timestamp_ns) {
      p.fail("timestamp", "timestamp " + timestamp + " ms is earlier than the previous row's " +
                              previous_timestamp + " ms");
    }
    previous_timestamp = std::move(timestamp);
    records.push_back(std::move(r));
  }
  if (records.empty()) throw ConfigError(name, 0, 0, "", "trace has no requests");
  return records;
}

std::vector<TraceRecord> read_mooncake_trace(const std::string& path) {
  return read_input_stream(path, InputKind::kData, "cannot open trace file",
                           [&](std::istream& in) { return read_mooncake_trace(in, path); });
}

}  // namespace moesim::sim
