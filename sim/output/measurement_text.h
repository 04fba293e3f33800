// The measured window and censored percentiles of a run summary, for people and as JSON: the
// "measured" lines of the text summary, the latency rows (">=" for a Kaplan-Meier lower bound, the
// censored requests counted beside the samples), summary.json's "measurement" object and its
// percentile objects (docs/outputs.md, "Steady state" and "Censored requests").
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "sim/metrics/run_metrics.h"

namespace moesim::sim::output {

// {"p50", "p90", "p99", "mean", "max", "count", "censored"} and "pNN_lower_bound": true where a
// quantile is a lower bound; null where there is no data.
nlohmann::json percentiles_json(const Percentiles& p);
// summary.json's "measurement".
nlohmann::json measurement_json(const MeasurementSummary& m);
// The "measured" lines (nothing for a summary of records, MeasurementSummary::analysed false).
void write_measurement_text(std::ostream& os, const MeasurementSummary& m);
// One row of the latency table: name, p50, p90, p99, mean, max, samples (+ in flight).
void write_latency_row(std::ostream& os, const char* name, const Percentiles& p);

}  // namespace moesim::sim::output
