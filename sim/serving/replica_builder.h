// The replica builder: the one place that turns (scenario, replica index, placement) into a ready
// step model with its cost model, network model and routing stream. The cluster, the policy
// context (replacing a replica's routed experts), the layer study, the pruning study, the
// search's diagnosis (sim/study/infeasibility.h) and validation's re-simulation all build their
// step models here, so they price the same inputs alike (tests/sim/serving/replica_builder_test.cc
// holds them to equal step durations).
//
// Per scenario it resolves once: the topology the network and the step model run on (the
// scenario's, or its copy with a calibrated profile's [network] section applied), the cost model
// ([cost], the profile already read by load_scenario), the memory inputs of one GPU, and the
// built-in network models (SimGrid included when built with it).
//
// Naming rules the users share: replica r spans global GPUs [r * G, (r + 1) * G) for G GPUs
// per replica; its routing draws are seeded by routing_seed(root seed, r), the first draw of the
// stream "routing.replica.<r>" (the stream a Simulation with that root seed hands out), on the
// popularity every replica shares, drawn from routing_seed(root seed, 0) (make_replica_routing).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/ids.h"
#include "sim/cost/cost_model.h"
#include "sim/memory/memory_layout.h"
#include "sim/model/model_card.h"
#include "sim/network/network_model.h"
#include "sim/placement/expert_placement.h"
#include "sim/placement/layer_placements.h"
#include "sim/routing/routing_model.h"
#include "sim/routing/routing_spec.h"
#include "sim/routing/synthetic_routing.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/network_models.h"
#include "sim/serving/step_model.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// What one replica runs on. The step model points into the other members: keep them together
// (moving the struct is fine, the members are heap-allocated).
struct ReplicaParts {
  std::vector<GpuId> gpus;
  std::unique_ptr<LayerPlacements> placements;  // per MoE layer; null without MoE layers
  std::unique_ptr<RoutingModel> routing;        // null without MoE layers
  std::unique_ptr<NetworkModel> network;        // null without MoE layers
  std::unique_ptr<StepModel> step_model;
};

class ReplicaBuilder {
 public:
  // Resolves the scenario's cost model and network topology (see the file comment). `scenario`
  // must outlive the builder and everything it builds.
  explicit ReplicaBuilder(const Scenario& scenario);

  const Scenario& scenario() const { return sc_; }
  // The topology the network and step models run on (calibrated when the profile says so).
  const Topology& topology() const { return *topology_; }
  const CostModel& cost() const { return *cost_; }

  // Global GPU ids of replica `replica_idx` (see the file comment).
  std::vector<GpuId> replica_gpus(int32_t replica_idx) const;
  // The routing seed of replica `replica_idx` under `root_seed` (see the file comment).
  static uint64_t routing_seed(uint64_t root_seed, int32_t replica_idx);
  // The contiguous or strided layout ([deployment] placement) of the routed experts over one
  // replica's GPUs; null for a model without MoE layers. Precondition (checked): placement is not
  // "eplb" (that layout differs per layer: static_placements).
  std::unique_ptr<ExpertPlacement> static_placement() const;
  // The deployment's placement of every MoE layer; null for a model without MoE layers. Contiguous
  // or strided: the same layout in every layer. EPLB: each layer balanced on its own
  // (balance_placements, experts + redundant_slots physical slots) from `routing`'s expected
  // shares at step 0 (equal loads when it states none); `routing` is then required.
  std::unique_ptr<LayerPlacements> static_placements(RoutingModel* routing = nullptr) const;

  // One GPU's memory inputs for `card`: the fullest GPU's expert slots summed over `card`'s MoE
  // layers (no slots without placements).
  GpuMemoryInputs memory_inputs(const ModelCard& card, const LayerPlacements* placements) const;
  // The memory layout of one GPU. Throws ConfigError (the scenario's file, key `key_path`) when
  // the weights do not fit, `what` describing the deployment in the message.
  GpuMemoryLayout memory_layout(const ModelCard& card, const LayerPlacements* placements,
                                const std::string& key_path, const std::string& what) const;

  // Speculative decoding's draft model on GPUs of its own (SpeculativeSpec::draft_gpus > 0): the
  // draft GPUs of replica `replica`.
  std::vector<GpuId> draft_gpus(int32_t replica) const;
  // Caps `layout`'s KV pool (each of `num_ranks` ranks) to the tokens whose draft KV the draft
  // GPUs can hold: each holds the whole draft model, the scenario's workspace and reserve, and
  // 1 / draft_gpus of the draft KV of every token in the replica's pools (every admitted token
  // needs its draft KV too, as on co-located GPUs). Nothing changes without draft GPUs. Throws
  // ConfigError (speculative.draft_gpus) when the draft model does not fit or leaves no room for
  // one KV block per rank.
  void cap_kv_pool_for_draft_gpus(GpuMemoryLayout& layout, int32_t num_ranks) const;

  // A network model of the scenario's kind ([network] model) on topology().
  std::unique_ptr<NetworkModel> make_network() const;
  // The scenario's synthetic routing ([routing], or `spec`) for `card`'s MoE layers.
  std::unique_ptr<RoutingModel> make_routing(uint64_t seed) const;
  std::unique_ptr<RoutingModel> make_routing(const RoutingSpec& spec, uint64_t seed) const;

  // Replica `replica_idx`'s synthetic routing under `root_seed`: its draws seeded by
  // routing_seed(root_seed, replica_idx), on the popularity of routing_seed(root_seed, 0) that
  // every replica shares (expert popularity is the model's and its traffic's, not a replica's:
  // docs/routing.md, "Replicas"). Replica 0's routing is make_routing(routing_seed(root_seed, 0)).
  std::unique_ptr<RoutingModel> make_replica_routing(int32_t replica_idx, uint64_t root_seed) const;

  // A step model of `card` on `gpus` with the builder's topology, deployment and cost model.
  // Pointers may be null for a model without MoE layers and must outlive the step model.
  std::unique_ptr<StepModel> make_step_model(const ModelCard& card, std::vector<GpuId> gpus,
                                             const LayerPlacements* placements,
                                             NetworkModel* network, RoutingModel* routing) const;

  // Replica `replica_idx` of the scenario as the cluster runs it: its GPUs, its synthetic routing
  // (make_replica_routing), the static placements (EPLB: profiled from that routing), a network
  // model and the step model over them.
  ReplicaParts build(int32_t replica_idx, uint64_t root_seed) const;

 private:
  const Scenario& sc_;
  std::shared_ptr<const Topology> topology_;
  std::unique_ptr<CostModel> cost_;
  // The scenario card's replicas' shared routed-expert memo (make_step_model).
  mutable std::shared_ptr<StepModel::ExpertMemoTable> expert_memo_;
  // The replicas' shared popularity (make_replica_routing), for the last root seed asked.
  mutable std::shared_ptr<SyntheticPopularity> popularity_;
  // The first network model make_network() made, kept when its kind shares (fresh_copy()): the
  // models returned are its fresh copies. Not thread-safe: a builder serves one run (or study)
  // at a time.
  mutable std::unique_ptr<NetworkModel> network_prototype_;
};

}  // namespace moesim::sim
