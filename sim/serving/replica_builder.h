// The replica builder: the one place that turns (scenario, replica index, placement) into a
// replica: its step model with cost, network and routing models, the options it runs with
// (step_model_options), its memory layout (with the draft-GPU cap), its scheduler, its check
// replica and the records of its GPUs. The cluster, the policies (rebuild), the layer study, the
// pruning study, the search's diagnosis and validation's re-simulation all build here, so they
// price the same inputs alike (tests/sim/serving/replica_builder_test.cc holds them to equal step
// durations). Naming rules: replica r spans global GPUs [r * G, (r + 1) * G) for G GPUs per
// replica; its routing draws are seeded by routing_seed(root seed, r) on the popularity every
// replica shares, drawn from routing_seed(root seed, 0) (docs/routing.md, "Replicas").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/id_window.h"
#include "sim/core/ids.h"
#include "sim/cost/cost_model.h"
#include "sim/memory/kv_tiers.h"
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
#include "sim/serving/replica.h"
#include "sim/serving/step_model.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// What a run asks of its replicas beyond the scenario.
struct ReplicaRunSetup {
  uint64_t root_seed = 1;
  bool report_expert_loads = false;  // a policy acts on expert loads
  bool check_fidelity = false;       // build each replica's check replica on the other fidelity
  KvTiers* kv_tiers = nullptr;       // the nodes' lower KV tiers ([kv_tiers]); null without
  IdWindow<Seq>* seqs = nullptr;     // the run's sequences, which the schedulers index
};

// What a step model is built for (step_model_options).
struct StepModelUse {
  int32_t replica_idx = 0;      // whose draft GPUs speculative decoding uses
  bool speculative = false;     // with the scenario's speculative decoding
  bool other_fidelity = false;  // at the fidelity the scenario does not name (a check replica)
  bool report_expert_loads = false;
  bool track_nic_bytes = false;
  std::vector<BackgroundTransfer>* background = nullptr;  // the replica's transfers
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
  // The memory layout of one GPU of a replica serving `card` with `placements`, its KV pool
  // capped for the draft GPUs (speculative.draft_gpus: each holds the whole draft model, the
  // scenario's workspace and reserve, and 1 / draft_gpus of the draft KV of every token in the
  // replica's pools). Throws ConfigError (the scenario's file, key `key_path`) when the weights
  // do not fit, `what` describing the deployment, or (speculative.draft_gpus) when the draft
  // model leaves no room for one KV block per rank.
  GpuMemoryLayout memory_layout(const ModelCard& card, const LayerPlacements* placements,
                                const std::string& key_path, const std::string& what) const;

  // Speculative decoding's draft model on GPUs of its own (SpeculativeSpec::draft_gpus > 0): the
  // draft GPUs of replica `replica`.
  std::vector<GpuId> draft_gpus(int32_t replica) const;

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

  // The options of a step model of `card` for `use`: the scenario's fidelity (or the other one),
  // the low-latency kernels' fixed costs from a calibrated profile, the shared routed-expert memo
  // of the card, and what `use` asks.
  StepModelOptions step_model_options(const ModelCard& card, const StepModelUse& use) const;
  // A step model of `card` on `gpus` with the builder's topology, deployment and cost model.
  // Pointers may be null for a model without MoE layers and must outlive the step model.
  std::unique_ptr<StepModel> make_step_model(const ModelCard& card, std::vector<GpuId> gpus,
                                             const LayerPlacements* placements,
                                             NetworkModel* network, RoutingModel* routing,
                                             const StepModelOptions& options) const;
  // The same with step_model_options(card, {}): the scenario's fidelity, nothing reported.
  std::unique_ptr<StepModel> make_step_model(const ModelCard& card, std::vector<GpuId> gpus,
                                             const LayerPlacements* placements,
                                             NetworkModel* network, RoutingModel* routing) const;

  // Replica `replica_idx`'s parts: its GPUs, its synthetic routing (make_replica_routing), the
  // static placements (EPLB: profiled from that routing), a network model and the step model
  // over them with step_model_options(card, {}).
  ReplicaParts build(int32_t replica_idx, uint64_t root_seed) const;

  // Every replica of the scenario as a run runs it: parts (their step models with speculative
  // decoding, the run's reporting and their background transfers), check replicas, the memory
  // layout (replica 0's, every replica's GPUs holding the same slots), schedulers, and P/D
  // roles. Throws ConfigError when the deployment does not fit in memory.
  std::vector<Replica> build_replicas(const ReplicaRunSetup& setup) const;
  // The records of the run's GPUs: every replica's GPUs in id order, then the draft GPUs of their
  // own (SpeculativeSpec::draft_gpus) of every replica.
  std::vector<GpuRecord> gpu_records(const std::vector<Replica>& replicas) const;
  // The memory fields of a replica GPU's record, from the replica's layout and placements.
  static void fill_gpu_memory(const Replica& replica, GpuRecord& record);
  // Replica `r` serving `card` (the scenario's layers with fewer routed experts per MoE layer,
  // e.g. pruned) with `placement` of those experts in every MoE layer and `routing` over them,
  // before its first step: its layout (memory_layout) and scheduler memory, placements and step
  // models (main and check) rebuilt as build_replicas() builds them. `card` and `routing` must
  // outlive the replica. Throws ConfigError when the layout does not fit.
  void rebuild(Replica& r, const ModelCard& card, const ExpertPlacement& placement,
               RoutingModel* routing, const ReplicaRunSetup& setup) const;

 private:
  const Scenario& sc_;
  std::shared_ptr<const Topology> topology_;
  std::unique_ptr<CostModel> cost_;
  // The step models of the replicas and of a check replica over `gpus`, placements and routing.
  void make_step_models(Replica& r, const ModelCard& card, RoutingModel* routing,
                        const ReplicaRunSetup& setup) const;
  void cap_kv_pool_for_draft_gpus(GpuMemoryLayout& layout, int32_t num_ranks) const;
  // The routed-expert memo the scenario card's step models share (step_model_options).
  std::shared_ptr<ExpertMemoTable> expert_memo_;
  // The replicas' shared popularity (make_replica_routing), for the last root seed asked.
  mutable std::shared_ptr<SyntheticPopularity> popularity_;
  // The first network model make_network() made, kept when its kind shares (fresh_copy()): the
  // models returned are its fresh copies. Not thread-safe: a builder serves one run (or study)
  // at a time.
  mutable std::unique_ptr<NetworkModel> network_prototype_;
};

}  // namespace moesim::sim
