// The planner's table of a sweep (planner.h), read back from the sweep's CSV: one entry per
// configuration from its rows (one per seed). Reading the CSV rather than the runs makes the table
// the same for one process, a resumed sweep, an MPI job and merged shards.
//
// Per configuration: the throughputs, TTFT p99 and TPOT p99 are means over its rows with status
// ok (and the figure); the attainment is pooled (sum of num_slo_met / sum of num_slo_decided);
// the cost is computed from the mean throughputs. It is feasible when every row has status ok and
// feasible = true; infeasible_reason names the first row that is not ("seed 2: attainment 0.97 <
// 0.99"). A configuration without an ok row has the first row's error.
#pragma once

#include <istream>
#include <string>

#include "sim/study/planner.h"

namespace moesim::sim::study {

// Reads a whole sweep's CSV (header first, rows in any order). `name` names it in errors:
// ConfigErrors for a CSV that is not a sweep's (missing columns, rows of another width) or whose
// rows were written with different feasible_limits.
Plan plan_from_sweep_csv(std::istream& csv, const std::string& name);

}  // namespace moesim::sim::study
