// The run summary's cost-model lines: which cost model priced the run and how many of its queries
// no fit priced inside its range, split into those priced by a stated rule and those extrapolated
// without one (docs/calibration.md, "Where no fit applies"), with the op kinds of each.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "sim/cost/cost_spec.h"
#include "sim/metrics/run_metrics.h"

namespace moesim::sim::output {

// Adds to a summary's `counters` object: `cost_by_rule_queries` and the per-kind objects
// `cost_out_of_range_by_kind` and `cost_by_rule_by_kind` (op kind name -> count, nonzero kinds
// only; empty objects when none). `cost_out_of_range_queries` is written with the other counters.
void add_cost_query_json(nlohmann::json& counters, const RunCounters& c);

// The "cost model" lines of the text summary: the model (and profile), the two totals, and one
// line per nonzero category listing "kind count" pairs.
void write_cost_query_text(std::ostream& os, const CostSpec& cost, const RunCounters& c);

}  // namespace moesim::sim::output
