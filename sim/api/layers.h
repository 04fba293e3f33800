// `moesim layers`: per-layer all-to-all versus expert compute for one decode (or prefill) step
// as the batch grows, with the scenario's routing skew and with uniform routing
// (sim/study/layer_study.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/study/layer_study.h"

namespace moesim::sim::api {

struct LayersRequest {
  std::string scenario_path;
  std::vector<int64_t> batches = {4, 8, 16, 32, 64, 128};  // sequences per GPU, each >= 1
  int64_t context_tokens = 4096;                           // >= 0
  int64_t seed = 1;                                        // >= 0
  std::optional<std::string> network_model;  // replaces [network] model (a registered name)
  std::optional<std::string> overlap;        // replaces [deployment] overlap
  int64_t prefill_tokens = 0;                // > 0: each sequence a prefill chunk, >= 0
  bool timeline = false;  // GPU 0's spans of the middle MoE layer, first batch size
};

struct LayersReport {
  Scenario scenario;  // with the network model and overlap of the request
  LayersRequest request;
  std::vector<study::LayerStudyRow> rows;
  std::vector<study::LayerStudySpan> timeline;
};

LayersReport layers(const LayersRequest& request);

// `moesim layers --json`: the rows, or {"rows": [...], "timeline": [...]} with the timeline.
nlohmann::json layers_json(const LayersReport& report);
void write_layers_text(std::ostream& os, const LayersReport& report);

}  // namespace moesim::sim::api
