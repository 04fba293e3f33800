// One MoE layer of a step, from the router's output to the combine: the layer's routing drawn
// for the step's tokens, every GPU's experts priced (ExpertPricer), the expert loads and balance
// reported (LoadReporter), and the dispatch and combine all-to-alls timed. Two implementations,
// the fidelity (docs/fast_fidelity.md): ExactMoeLayer draws the (source, destination) matrix
// and runs the network model; FastMoeLayer draws per-destination totals and times them with
// FastAllToAll, falling back to an exact layer where it does not apply. Each is testable against
// the other on the same inputs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/ids.h"
#include "sim/model/model_card.h"
#include "sim/network/network_model.h"
#include "sim/network/node_limited_routing.h"
#include "sim/placement/layer_placements.h"
#include "sim/routing/routing_model.h"
#include "sim/scenario/deployment.h"
#include "sim/serving/expert_pricer.h"
#include "sim/serving/load_reporter.h"
#include "sim/serving/nic_links.h"
#include "sim/serving/step_model_options.h"
#include "sim/serving/step_state.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// One MoE layer to run.
struct MoeLayerCall {
  int64_t step_idx = 0;
  int32_t layer_idx = 0;  // the layer as traced (StepObserver::on_routing)
  int32_t moe_idx = 0;    // its MoE layer: placement and routing
  const MoeSpec* moe = nullptr;
  // The layer is priced per micro-batch afterwards (split_microbatch, time_microbatch): the exact
  // fidelity times no whole-batch collectives.
  bool microbatched = false;
  bool in_draft = false;  // a draft pass: no expert loads, no routing to observers
  StepObserver* observer = nullptr;
};

// A layer's (or micro-batch's) dispatch and combine: seconds and bytes.
struct CollectiveTimes {
  double dispatch_s = 0, combine_s = 0;
  double dispatch_bytes = 0, combine_bytes = 0;
};

// What the MoE-layer models of one step model work with. References and pointers must outlive
// them; `nic` is null unless StepModelOptions::track_nic_bytes.
struct MoeLayerDeps {
  const ModelCard& card;
  const Topology& topology;
  const DeploymentSpec& deployment;
  std::span<const GpuId> gpus;
  const LayerPlacements& placements;
  NetworkModel& network;
  RoutingModel& routing;
  ExpertPricer& pricer;
  LoadReporter& reporter;
  const StepModelOptions& options;
  const NicLinks* nic = nullptr;
  double dispatch_row_bytes = 0, combine_row_bytes = 0;
};

// Node-limited routing (node_limited_routing.h) of the called layer over its placement: the
// limit per topology node into `out` (`scratch` reused).
void fill_layer_node_limit(const MoeLayerDeps& deps, const MoeLayerCall& call,
                           std::vector<int32_t>& scratch, NodeLimit& out);

class MoeLayerModel {
 public:
  virtual ~MoeLayerModel() = default;
  // Draws the layer's routing for state.gpu_tokens, prices every GPU's experts (the pricer's
  // ffn_s(), the balance into state.result), reports the loads, and times the dispatch and the
  // combine of the whole batch (the exact fidelity skips them when call.microbatched).
  virtual CollectiveTimes run(const MoeLayerCall& call, StepState& state) = 0;
  // Micro-batch timelines, after run() with call.microbatched. begin_microbatches() keeps the
  // layer's selections; split_microbatch() gives micro-batch `mb` its sources' share of them
  // (micro-batch 0 in proportion to `mb0_tokens` of `whole_tokens` per GPU, whose sums are
  // given; micro-batch 1 the rest); time_microbatch() times its collectives on
  // state.gpu_tokens (the micro-batch's) and leaves its selections in selections();
  // end_microbatches() restores the whole layer's (`total`: the micro-batches' collectives summed).
  virtual void begin_microbatches() = 0;
  virtual void split_microbatch(int32_t mb, std::span<const int64_t> whole_tokens,
                                std::span<const int64_t> mb0_tokens, int64_t whole_sum,
                                int64_t mb0_sum) = 0;
  virtual CollectiveTimes time_microbatch(int32_t mb, const MoeSpec& m, StepState& state) = 0;
  virtual void end_microbatches(const MoeLayerCall& call, const CollectiveTimes& total,
                                StepState& state) = 0;
  // Selections per destination GPU of the last run() or time_microbatch().
  virtual std::span<const int64_t> selections() const = 0;
};

}  // namespace moesim::sim
