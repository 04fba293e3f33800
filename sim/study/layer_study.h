// The teaching case of per-layer communication versus expert compute (`moesim layers`): for each
// batch size, one decode (or prefill) step of the scenario's replica 0, with the scenario's routing
// skew and with uniform routing, read per MoE layer off the step model's own spans: the
// all-to-all's time, the part the layer does not hide, the slowest and the mean GPU's compute,
// the barrier wait and the compute time lost to SM sharing. The crossover (where the all-to-all
// outgrows expert compute) is read off the model, not written in. The replica is built through
// ReplicaBuilder as the cluster builds its replica 0. The figures' definitions: docs/serving.md,
// "The layer study: moesim layers".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"

namespace moesim::sim::study {

struct LayerStudyRow {
  int64_t seqs_per_gpu = 0;
  bool skewed = false;
  double comm_us = 0;          // dispatch + combine per MoE layer, overlapped or not
  double exposed_comm_us = 0;  // layer_us - compute_max_us (see the file comment)
  double layer_us = 0;         // wall time of one MoE layer
  double compute_max_us = 0;   // slowest GPU's attention + router + experts per MoE layer
  double expert_max_us = 0;    // slowest GPU's routed + shared experts per MoE layer
  double expert_mean_us = 0;   // mean over GPUs
  double wait_mean_us = 0;     // mean barrier wait ("wait" spans) per GPU per MoE layer; 0 with
                               // overlap (the overlapped timelines emit no "wait" spans)
  double sm_lost_mean_us = 0;  // compute time lost to SM sharing per GPU per MoE layer (mean over
                               // GPUs; in compute_max_us already); 0 without a micro-batch
                               // schedule or with comm_sms = 0
  double step_ms = 0;          // the whole decode step
};

// One span of GPU 0 in the study's timeline layer (LayerStudyOptions::timeline).
struct LayerStudySpan {
  std::string name;     // the step model's span name, e.g. "dispatch", "attention/mb1"
  double start_us = 0;  // from the layer's start (its first span on any GPU)
  double duration_us = 0;
  double sm_lost_us = 0;  // of duration_us, the time lost to SM sharing
};

struct LayerStudyOptions {
  int64_t context_tokens = 4096;  // per sequence (cached context)
  // 0: decode (one new token per sequence); > 0: each sequence is a prefill chunk of this many
  // new tokens over context_tokens (seqs_per_gpu x prefill_tokens new tokens per GPU).
  int64_t prefill_tokens = 0;
  uint64_t seed = 1;  // the routing of every step
  // Non-null: GPU 0's spans, in start order, of the middle MoE layer of the first batch size's
  // step with the scenario's routing.
  std::vector<LayerStudySpan>* timeline = nullptr;
};

// Rows for every batch size, skewed (the scenario's routing) then uniform. Throws ConfigError
// when the model has no MoE layer.
std::vector<LayerStudyRow> run_layer_study(const Scenario& scenario,
                                           const std::vector<int64_t>& seqs_per_gpu,
                                           const LayerStudyOptions& options);
// Decode with `context_tokens` per sequence, routing seeded with `seed`, no timeline.
inline std::vector<LayerStudyRow> run_layer_study(const Scenario& scenario,
                                                  const std::vector<int64_t>& seqs_per_gpu,
                                                  int64_t context_tokens, uint64_t seed) {
  LayerStudyOptions o;
  o.context_tokens = context_tokens;
  o.seed = seed;
  return run_layer_study(scenario, seqs_per_gpu, o);
}

}  // namespace moesim::sim::study
