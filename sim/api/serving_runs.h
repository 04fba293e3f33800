// Reading what `moesim-engine serve TRACE --out DIR` wrote (docs/calibration.md, "Serving
// validation"): DIR/summary.json ("schema": "moesim.serve_summary.v1", the trace it served, the
// counts by outcome) and DIR/requests.csv (docs/outputs.md's requests.csv schema, which the
// simulator's runs write too). Strict: a missing key or column, a malformed cell or counts that
// disagree with the rows is a ConfigError naming the file, the key or row and column, and why.
#pragma once

#include <string>
#include <vector>

#include "sim/calibration/serving_comparison.h"

namespace moesim::sim::api {

// The rows of a requests.csv, in file order. Columns are found by name in the header line.
std::vector<ServedRequest> read_requests_csv(const std::string& path);

// A serve run's directory: its summary's trace and its requests, checked against the summary's
// counts (arrived = rows, and completed / rejected / in_flight by outcome).
ServingRun read_serving_run(const std::string& dir);

// The runs grouped by the trace they served (the string the summary gives), groups in the order
// their first run was given, runs in the order given.
std::vector<std::vector<ServingRun>> group_by_trace(std::vector<ServingRun> runs);

}  // namespace moesim::sim::api
