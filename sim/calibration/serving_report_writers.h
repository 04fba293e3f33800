// Writers of a serving validation (serving_comparison.h): report.md (also what the terminal
// shows), report.json with every figure, and points.csv with one row per (load point, metric),
// plots-ready. Relative errors and spreads are percentages in the markdown and fractions in JSON
// and CSV; an absent value is "-" in markdown, null in JSON and an empty cell in CSV.
#pragma once

#include <ostream>

#include "sim/calibration/serving_comparison.h"

namespace moesim::sim {

// The knee line (measured, predicted, error, the rule), the load points, a table per metric (the
// engine's mean, range and spread beside the simulation's value and error at every point) and the
// errors split below / above the measured knee.
void write_serving_markdown(std::ostream& os, const ServingComparison& c);
// report.json: schema "moesim.serving_validation.v1".
void write_serving_json(std::ostream& os, const ServingComparison& c);
// points.csv: trace,offered_rate_per_s,side,metric,unit,engine_runs,engine_mean,engine_min,
// engine_max,spread_rel,simulated,error_rel,within_spread.
void write_serving_points_csv(std::ostream& os, const ServingComparison& c);

}  // namespace moesim::sim
