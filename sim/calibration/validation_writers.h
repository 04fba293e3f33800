// Writers of a validation report (validation.h): the text table the terminal shows, the same as
// markdown for reports, JSON with every statistic, and one CSV per comparison level with a row
// per sample (plots-ready). Times are seconds in JSON and CSV, microseconds in the tables;
// relative errors are percentages in the tables and fractions in JSON.
#pragma once

#include <ostream>

#include "sim/calibration/validation.h"

namespace moesim::sim {

// The table `moesim validate` prints: one row per op kind, phase, per-step compute and composed
// step duration, then the end-to-end metrics and the re-simulation's counters.
void write_validation_text(std::ostream& os, const ValidationReport& r);
// report.md: the same content as the text table, as markdown tables.
void write_validation_markdown(std::ostream& os, const ValidationReport& r);
// report.json: every statistic and counter of the report (not the per-sample rows).
void write_validation_json(std::ostream& os, const ValidationReport& r);
// ops.csv: step,gpu,layer,op,dtype,tokens,flops,bytes,measured_s,simulated_s,in_range.
void write_ops_csv(std::ostream& os, const ValidationReport& r);
// steps.csv: step,replica,gpu,measured_compute_s,simulated_compute_s.
void write_steps_csv(std::ostream& os, const ValidationReport& r);
// phases.csv: step,gpu,layer,phase,measured_s,simulated_s.
void write_phases_csv(std::ostream& os, const ValidationReport& r);

}  // namespace moesim::sim
