#include "sim/api/serving_runs.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "base/json_number.h"
#include "base/number_text.h"
#include "sim/config/config_error.h"
#include "sim/config/input_files.h"
#include "sim/study/csv.h"

namespace moesim::sim::api {
namespace {

using nlohmann::json;

constexpr const char* kServeSummarySchema = "moesim.serve_summary.v1";

enum Column {
  kRequestId,
  kOutcome,
  kArrivalNs,
  kDoneNs,
  kGeneratedTokens,
  kPreemptions,
  kQueueingMs,
  kTtftMs,
  kTpotMs,
  kE2eMs,
  kNumColumns
};
constexpr std::array<const char*, kNumColumns> kColumnNames = {
    "request_id",  "outcome",     "arrival_ns", "done_ns", "generated_tokens",
    "preemptions", "queueing_ms", "ttft_ms",    "tpot_ms", "e2e_ms"};

class RowReader {
 public:
  RowReader(const std::string& path, int line, const std::vector<std::string>& cells,
            const std::array<size_t, kNumColumns>& at)
      : path_(path), line_(line), cells_(cells), at_(at) {}

  [[noreturn]] void fail(Column c, const std::string& reason) const {
    throw ConfigError(path_, line_, 0, kColumnNames[c], reason);
  }
  const std::string& cell(Column c) const { return cells_[at_[c]]; }
  int64_t integer(Column c) const {
    std::string reason;
    const std::optional<int64_t> v = parse_integer_text(cell(c), &reason);
    if (!v) fail(c, reason);
    return *v;
  }
  int64_t non_negative(Column c) const {
    const int64_t v = integer(c);
    if (v < 0) fail(c, "must be >= 0, not " + std::to_string(v));
    return v;
  }
  // An empty cell is a time not reached.
  std::optional<double> ms(Column c) const {
    if (cell(c).empty()) return std::nullopt;
    std::string reason;
    const std::optional<double> v = parse_number_text(cell(c), &reason);
    if (!v) fail(c, reason);
    if (*v < 0) fail(c, "a latency must be >= 0");
    return v;
  }

 private:
  const std::string& path_;
  int line_;
  const std::vector<std::string>& cells_;
  const std::array<size_t, kNumColumns>& at_;
};

ServedRequest read_row(const RowReader& r) {
  ServedRequest q;
  q.request_id = r.integer(kRequestId);
  const std::string& outcome = r.cell(kOutcome);
  if (outcome == "completed") {
    q.outcome = ServedOutcome::kCompleted;
  } else if (outcome == "rejected") {
    q.outcome = ServedOutcome::kRejected;
  } else if (outcome == "in_flight") {
    q.outcome = ServedOutcome::kInFlight;
  } else {
    r.fail(kOutcome, "unknown outcome '" + outcome + "' (valid: completed, rejected, in_flight)");
  }
  q.arrival_ns = r.non_negative(kArrivalNs);
  q.done_ns = r.integer(kDoneNs);
  q.generated_tokens = r.non_negative(kGeneratedTokens);
  q.preemptions = r.non_negative(kPreemptions);
  q.queueing_ms = r.ms(kQueueingMs);
  q.ttft_ms = r.ms(kTtftMs);
  q.tpot_ms = r.ms(kTpotMs);
  q.e2e_ms = r.ms(kE2eMs);
  if (q.outcome == ServedOutcome::kCompleted) {
    if (q.done_ns < q.arrival_ns)
      r.fail(kDoneNs, "a completed request must be done at or after its arrival");
    if (!q.ttft_ms) r.fail(kTtftMs, "empty for a completed request");
    if (!q.e2e_ms) r.fail(kE2eMs, "empty for a completed request");
    if (!q.queueing_ms) r.fail(kQueueingMs, "empty for a completed request");
  }
  return q;
}

std::vector<ServedRequest> read_rows(std::istream& in, const std::string& path) {
  std::string text;
  std::vector<std::string> cells;
  int line = 1;
  if (!std::getline(in, text)) throw ConfigError(path, 1, 0, "", "empty file: no header line");
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (!study::split_csv_line(text, cells)) {
    throw ConfigError(path, 1, 0, "", "unterminated quote in the header");
  }
  std::array<size_t, kNumColumns> at{};
  for (int c = 0; c < kNumColumns; ++c) {
    const auto it = std::find(cells.begin(), cells.end(), kColumnNames[c]);
    if (it == cells.end()) {
      throw ConfigError(path, 1, 0, kColumnNames[c],
                        "missing column (docs/outputs.md, requests.csv)");
    }
    at[c] = static_cast<size_t>(it - cells.begin());
  }
  const size_t num_cells = cells.size();
  std::vector<ServedRequest> rows;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.empty()) continue;
    if (!study::split_csv_line(text, cells)) {
      throw ConfigError(path, line, 0, "", "unterminated quote");
    }
    if (cells.size() != num_cells) {
      throw ConfigError(
          path, line, 0, "",
          std::to_string(cells.size()) + " cells, the header has " + std::to_string(num_cells));
    }
    rows.push_back(read_row(RowReader(path, line, cells, at)));
  }
  return rows;
}

struct Summary {
  std::string trace, scenario;
  int64_t arrived = 0, completed = 0, rejected = 0, in_flight = 0;
};

Summary read_summary(const std::string& path) {
  const std::string text = read_input_text(path, InputKind::kConfig, "file not found");
  json j;
  try {
    j = parse_json(text);
  } catch (const JsonDepthError& e) {
    throw ConfigError(path, 0, 0, "", e.what());
  } catch (const json::exception& e) {
    throw ConfigError(path, 0, 0, "", "malformed JSON: " + json_exception_reason(e));
  }
  if (!j.is_object()) throw ConfigError(path, 0, 0, "", "not a JSON object");
  auto string_at = [&](const char* key) {
    const auto it = j.find(key);
    if (it == j.end()) throw ConfigError(path, 0, 0, key, "missing");
    if (!it->is_string()) throw ConfigError(path, 0, 0, key, "must be a string");
    return it->get<std::string>();
  };
  const std::string schema = string_at("schema");
  if (schema != kServeSummarySchema) {
    throw ConfigError(path, 0, 0, "schema",
                      "'" + schema + "' is not a serve run's summary ('" + kServeSummarySchema +
                          "', written by moesim-engine serve)");
  }
  Summary s;
  s.trace = string_at("trace");
  if (s.trace.empty()) throw ConfigError(path, 0, 0, "trace", "empty");
  s.scenario = string_at("scenario");
  const auto req = j.find("requests");
  if (req == j.end()) throw ConfigError(path, 0, 0, "requests", "missing");
  if (!req->is_object()) throw ConfigError(path, 0, 0, "requests", "must be an object");
  auto count = [&](const char* key) {
    const std::string key_path = std::string("requests.") + key;
    const auto it = req->find(key);
    if (it == req->end()) throw ConfigError(path, 0, 0, key_path, "missing");
    const std::optional<int64_t> v =
        it->is_number_integer() ? json_integer<int64_t>(*it) : std::nullopt;
    if (!v || *v < 0) throw ConfigError(path, 0, 0, key_path, "must be an integer >= 0");
    return *v;
  };
  s.arrived = count("arrived");
  s.completed = count("completed");
  s.rejected = count("rejected");
  s.in_flight = count("in_flight");
  return s;
}

}  // namespace

std::vector<ServedRequest> read_requests_csv(const std::string& path) {
  return read_input_stream(path, InputKind::kData, "file not found",
                           [&](std::istream& in) { return read_rows(in, path); });
}

ServingRun read_serving_run(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string summary_path = (fs::path(dir) / "summary.json").string();
  const std::string csv_path = (fs::path(dir) / "requests.csv").string();
  const Summary s = read_summary(summary_path);
  ServingRun run;
  run.dir = dir;
  run.trace = s.trace;
  run.scenario = s.scenario;
  run.requests = read_requests_csv(csv_path);
  int64_t by_outcome[3] = {0, 0, 0};
  for (const ServedRequest& r : run.requests) ++by_outcome[static_cast<int>(r.outcome)];
  auto check = [&](const char* key, int64_t summary_count, int64_t rows) {
    if (summary_count == rows) return;
    throw ConfigError(summary_path, 0, 0, std::string("requests.") + key,
                      std::to_string(summary_count) + ", but " + csv_path + " has " +
                          std::to_string(rows) + " such rows");
  };
  check("arrived", s.arrived, static_cast<int64_t>(run.requests.size()));
  check("completed", s.completed, by_outcome[static_cast<int>(ServedOutcome::kCompleted)]);
  check("rejected", s.rejected, by_outcome[static_cast<int>(ServedOutcome::kRejected)]);
  check("in_flight", s.in_flight, by_outcome[static_cast<int>(ServedOutcome::kInFlight)]);
  return run;
}

std::vector<std::vector<ServingRun>> group_by_trace(std::vector<ServingRun> runs) {
  std::vector<std::vector<ServingRun>> groups;
  for (ServingRun& r : runs) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const std::vector<ServingRun>& g) { return g[0].trace == r.trace; });
    if (it == groups.end()) {
      groups.emplace_back();
      it = std::prev(groups.end());
    }
    it->push_back(std::move(r));
  }
  return groups;
}

}  // namespace moesim::sim::api
