// The teaching case of issue 4: per-layer communication versus expert compute for one decode
// step as the batch grows. For each batch size (sequences per GPU), one decode step of the
// scenario's replica 0 is simulated with the scenario's routing skew and with uniform routing;
// the step model's own spans give, per MoE layer averaged over MoE layers, the all-to-all time,
// the part of it the layer does not hide, the slowest and the mean GPU's expert time and the
// barrier wait. The crossover (where the all-to-all outgrows expert compute) is read off the
// model, not written in.
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
//   comm            the dispatch + combine collectives (spans "dispatch" and "combine", or with
//                   [deployment] microbatch_overlap the span "dispatch+combine (overlapped)"):
//                   how long the all-to-all runs, hidden or not.
//   exposed comm    layer time - compute_max_us: what communication (and the barriers it
//                   implies) adds to the slowest GPU's compute. Without overlap it equals comm
//                   when attention is balanced (as here: every GPU has the same sequences); with
//                   overlap it is what the two half micro-batches leave uncovered
//                   (comm / 2 while comm <= expert compute).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/scenario/scenario.h"

namespace moesim::sim {

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
                               // overlap (the overlapped timeline emits no "wait" spans)
  double step_ms = 0;          // the whole decode step
};

// Rows for every batch size, skewed (the scenario's routing) then uniform. Context per
// sequence: `context_tokens`. Routing of every step is seeded with `seed`. Throws ConfigError
// when the model has no MoE layer.
std::vector<LayerStudyRow> run_layer_study(const Scenario& scenario,
                                           const std::vector<int64_t>& seqs_per_gpu,
                                           int64_t context_tokens, uint64_t seed);

}  // namespace moesim::sim
