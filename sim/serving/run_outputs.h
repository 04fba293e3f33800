// Writers for a run's outputs. All take a std::ostream; the CLI decides file names.
//   summary        text and JSON (run_summary.h, included here)
//   requests CSV   one row per arrived request
//   Chrome trace   JSON trace-event format (opens in Perfetto): one track per GPU
//   step trace     JSONL, docs/schemas/step_trace.md (what the engine replays)
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"
#include "sim/serving/run_summary.h"

namespace moesim::sim {

void write_requests_csv(std::ostream& os, const RunOutput& out);
// One row per executed step of every replica (RunOptions::step_series), in execution order.
void write_steps_csv(std::ostream& os, const RunOutput& out);
// One process per replica, named "replica R" plus its role ("prefill" / "decode" under P/D
// disaggregation, "pool NAME" with pools) from `deployment` when given, one track per GPU.
void write_chrome_trace(std::ostream& os, const RunOutput& out,
                        const DeploymentSpec* deployment = nullptr);
// Header with the model shapes, topology, replicas and placement, then one line per step.
void write_step_trace(std::ostream& os, const Scenario& sc, const RunOutput& out, uint64_t seed);
// The model card as the step-trace header's "model" object.
nlohmann::json model_shapes_json(const ModelCard& card, const DeploymentSpec& d);

}  // namespace moesim::sim
