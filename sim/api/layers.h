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
  // Sequences per GPU, each in [1, 2^20]; each batch's tokens per attention rank (sequences x
  // attention TP x tokens per sequence) at most 2^24 (scheduler.max_batch_tokens_per_gpu's range).
  std::vector<int64_t> batches = {4, 8, 16, 32, 64, 128};
  int64_t context_tokens = 4096;             // in [0, the model's max_context_tokens]
  int64_t seed = 1;                          // >= 0
  std::optional<std::string> network_model;  // replaces [network] model (a registered name)
  std::optional<std::string> overlap;        // replaces [deployment] overlap
  // > 0: each sequence a prefill chunk of this many tokens; context_tokens + prefill_tokens at
  // most the model's max_context_tokens.
  int64_t prefill_tokens = 0;
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
