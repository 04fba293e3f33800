// Everything a step model is built with beyond its card, GPUs and models: the fidelity,
// fixed kernel costs, speculative decoding, what it reports, and the background transfers its
// collectives carry. Derived from a scenario in one place (ReplicaBuilder::step_model_options)
// and fixed for the model's life: a StepModel has no setters.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/core/ids.h"
#include "sim/model/model_card.h"
#include "sim/network/network_model.h"
#include "sim/scenario/fidelity.h"
#include "sim/serving/expert_pricer.h"
#include "sim/serving/step_result.h"

namespace moesim::sim {

// Speculative decoding as the step model runs it (docs/serving.md, "Speculative decoding").
struct SpeculativeSetup {
  // Draft tokens per decode slice and step; 0: no draft passes. With the card's MTP modules
  // (draft_model null), draft pass i = 1..k runs one MTP module (the card's last layer: norms and
  // the 2h -> h projection, its attention, its FFN: a MoE FFN routed and dispatched like the last
  // MoE layer, then the output head) on the decode slices with d >= i, one token each.
  int32_t num_draft_tokens = 0;
  // A dense draft model instead of the MTP module (must outlive the step model): pass i runs all
  // its layers and its output head on every GPU for its rank's drafting sequences, without
  // collectives.
  const ModelCard* draft_model = nullptr;
  // The draft model on GPUs of its own (empty: co-located): pass i deals the replica's drafting
  // sequences round robin (rank by rank, in slice order) over them, each running the whole draft
  // model on its share, and lasts as long as the busiest; the token ids cross to the draft GPUs
  // and back (twice the route latency from the replica's first GPU to the first draft GPU).
  std::vector<GpuId> draft_gpus;
};

struct StepModelOptions {
  // exact: every MoE layer from its (source, destination) matrix through the network model.
  // fast (docs/fast_fidelity.md): per-destination totals timed by FastAllToAll, and the exact
  // fidelity where the fast one does not apply (a background transfer in flight, a routing model
  // without totals, participants FastAllToAll refuses).
  Fidelity fidelity = Fidelity::kExact;
  // Fixed cost of the MoE dispatch / combine kernels beyond the network model's time (a
  // calibrated profile's [[network.kernel]] fits for dispatch = "low_latency"), on both fidelities.
  KernelCost dispatch_kernel, combine_kernel;
  SpeculativeSetup speculative;
  // Whether StepResult::expert_loads is filled (a pass over experts per MoE layer).
  bool report_expert_loads = false;
  // Whether StepResult::nic_in_bytes / nic_out_bytes are filled (host-link contention).
  bool track_nic_bytes = false;
  // Background transfers the dispatch collectives carry (null: none), at most
  // `background_chunk_bytes` per (src, dst) pair per collective; run() decrements their
  // remaining bytes. Must outlive the model.
  std::vector<BackgroundTransfer>* background = nullptr;
  double background_chunk_bytes = 0;
  // Routed-expert seconds by (selections, slots) shared by the models of one card and cost model
  // (ExpertMemoTable::make); null: the model keeps its own where the cost model allows a memo.
  std::shared_ptr<ExpertMemoTable> expert_memo;
};

}  // namespace moesim::sim
