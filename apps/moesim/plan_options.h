// The planner options `moesim sweep` and `moesim search` share (docs/sweeps.md, "Planner
// outputs"): --gpu-price-per-hour USD and --plan FILE.csv|FILE.json.
#pragma once

#include <optional>
#include <string>

#include "apps/moesim/cli.h"
#include "sim/study/planner.h"

namespace moesim::cli {

// --gpu-price-per-hour: absent, or a number > 0 (else a usage error).
std::optional<double> gpu_price_option(Args& args);
// --plan: absent, or a path ending in .csv or .json whose directory is writable (else exit 2).
std::optional<std::string> plan_option(Args& args);
// Writes the plan to `path` atomically (CSV or JSON by its extension).
void write_plan_file(const sim::study::Plan& plan, const std::string& path);

}  // namespace moesim::cli
