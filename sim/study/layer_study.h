// The teaching case of issue 4: per-layer communication versus expert compute for one decode
// (or prefill: LayerStudyOptions::prefill_tokens) step as the batch grows. For each batch size
// (sequences per GPU), one decode step of the scenario's replica 0 is simulated with the scenario's
// routing skew and with uniform routing; the step model's own spans give, per MoE layer averaged
// over MoE layers, the all-to-all time, the part of it the layer does not hide, the slowest and the
// mean GPU's expert time and the barrier wait. The crossover (where the all-to-all outgrows expert
// compute) is read off the model, not written in. With a [speculative] table, each decode
// sequence verifies 1 + k tokens and the step includes its k draft passes (step_ms; the per-layer
// figures are the verification's layers).
//
// The step model is built through ReplicaBuilder (sim/serving/replica_builder.h), as the cluster
// builds replica 0: the same topology (calibrated when the scenario's profile says so), cost
// model, static placement and the scenario's network model ([network] model, never swapped).
//
// Definitions, per MoE layer (all in us, averaged over the model's MoE layers):
//   layer time      from the moment the first GPU starts the layer (its attention) to the moment
//                   the first GPU starts the next layer (or the output head). Every MoE layer
//                   ends with all GPUs together (after the combine barrier, or at the end of the
//                   overlapped timeline), so this is the layer's wall time.
//   compute         per GPU, its attention + router + experts spans in the layer; the slowest
//                   GPU's is compute_max_us.
//   comm            the dispatch + combine collectives (spans "dispatch" and "combine", with
//                   [deployment] overlap = "simple" the span "dispatch+combine (overlapped)",
//                   with a micro-batch schedule "dispatch/mb0" ... "combine/mb1" summed):
//                   how long the all-to-all runs, hidden or not.
//   exposed comm    layer time - compute_max_us: what communication (and the barriers it
//                   implies) adds to the slowest GPU's compute. Without overlap it equals comm
//                   when attention is balanced (as here: every GPU has the same sequences); with
//                   overlap it is what the two half micro-batches leave uncovered
//                   (simple: comm / 2 while comm <= expert compute). Under a micro-batch
//                   schedule the layers overlap each other (a micro-batch's combine runs under
//                   the other's next attention): layer time is from one MoE layer's first span
//                   to the next one's, and the per-layer times add up to the MoE layers' span.
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
  double step_ms = 0;          // the whole decode step
};

// One span of GPU 0 in the study's timeline layer (LayerStudyOptions::timeline).
struct LayerStudySpan {
  std::string name;     // the step model's span name, e.g. "dispatch", "attention/mb1"
  double start_us = 0;  // from the layer's start (its first span on any GPU)
  double duration_us = 0;
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
