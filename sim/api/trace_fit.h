// `moesim trace-fit TRACE`: the workload model fitted to a trace window (replay = "model") with
// its goodness of fit, and what a loop of the window keeps of its prefix reuse
// (sim/workload/trace_fit.h, docs/workload.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "sim/workload/trace_fit.h"

namespace moesim::sim::api {

struct TraceFitRequest {
  std::string path;
  // "mooncake" (JSONL) or "azure" (CSV); absent: by the file's extension (.jsonl, .csv).
  std::optional<std::string> kind;
  double start_s = 0;                   // the window, in trace time, as [workload] start_s / end_s
  std::optional<double> end_s;          // > start_s
  std::optional<int64_t> max_requests;  // >= 1
  uint64_t seed = 1;                    // of the model's sample ("workload" stream)
};

struct TraceFitResult {
  TraceFitRequest request;
  std::string kind;  // "mooncake" or "azure"
  TraceFitReport report;
};

// Reads the trace (ConfigError on a bad file) and fits it. UsageError on a bad request or a window
// that selects no rows or gives no lap length.
TraceFitResult trace_fit(const TraceFitRequest& request);

nlohmann::json trace_fit_json(const TraceFitResult& result);
void write_trace_fit_text(std::ostream& os, const TraceFitResult& result);

}  // namespace moesim::sim::api
