// The run summary: the human table printed on stdout, and the same content as JSON with units in
// the keys (docs/outputs.md). Figures without data are "n/a" in the text and null in the JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim::output {

nlohmann::json summary_json(const Scenario& sc, const RunOutput& out, uint64_t seed);
void write_summary_text(std::ostream& os, const Scenario& sc, const RunOutput& out, uint64_t seed);

}  // namespace moesim::sim::output
