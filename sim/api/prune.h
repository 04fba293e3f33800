// `moesim prune`: the expert-pruning study (sim/study/pruning_study.h): per pruned fraction,
// experts kept per layer, weight memory, KV pool, decode step latency and routing mass lost;
// optionally the plan of one fraction as a file for [policies.expert_pruning] plan_file.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/study/pruning_study.h"

namespace moesim::sim::api {

struct PruneRequest {
  std::string scenario_path;
  std::vector<double> fractions = {0.0, 0.2, 0.4, 0.6};  // each in [0, 1)
  int64_t batch_per_gpu = 64;      // decode sequences per attention rank, 1..2^20
  int64_t context_tokens = 4096;   // >= 1, at most the model's max_context_tokens
  int64_t profile_steps = 8;       // steps profiled (and held out), 1..2^20
  int64_t tokens_per_step = 4096;  // tokens sampled per step and layer, 1..2^24
  // The plan of the (single) fraction as JSON, for [policies.expert_pruning] plan_file.
  std::optional<std::string> plan_path;
  std::function<void(int64_t, int64_t)> progress;  // (stages done, stages in all)
};

// Runs the study and writes the plan file when asked. Text and JSON:
// study::format_pruning_study_text / _json.
study::PruningStudy prune(const PruneRequest& request);

}  // namespace moesim::sim::api
