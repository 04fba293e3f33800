#include "sim/serving/replica_builder.h"

#include <algorithm>
#include <string>
#include <utility>

#include "sim/config/config_error.h"
#include "sim/core/rng.h"
#include "sim/cost/cost_model_factory.h"
#include "sim/routing/synthetic_routing.h"

namespace moesim::sim {
namespace {

const MoeSpec* first_moe(const ModelCard& card) {
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe) return &l.ffn.moe;
  }
  return nullptr;
}

}  // namespace

ReplicaBuilder::ReplicaBuilder(const Scenario& scenario)
    : sc_(scenario),
      topology_(make_network_topology(scenario.cost, scenario.topology)),
      cost_(make_cost_model(scenario.cost, topology_->gpu_spec())) {}

std::vector<GpuId> ReplicaBuilder::replica_gpus(int32_t replica_idx) const {
  const int32_t n = sc_.deployment.gpus_per_replica;
  std::vector<GpuId> gpus;
  gpus.reserve(static_cast<size_t>(n));
  for (int32_t g = 0; g < n; ++g) gpus.emplace_back(replica_idx * n + g);
  return gpus;
}

uint64_t ReplicaBuilder::routing_seed(uint64_t root_seed, int32_t replica_idx) {
  return RngStream(root_seed, "routing.replica." + std::to_string(replica_idx)).next_u64();
}

std::unique_ptr<ExpertPlacement> ReplicaBuilder::static_placement() const {
  const ModelCard& card = *sc_.model;
  const MoeSpec* moe = first_moe(card);
  if (!moe) return nullptr;
  const DeploymentSpec& d = sc_.deployment;
  const RoutingShape shape = routing_shape_of(card);
  const int32_t gpus_per_node = std::min(d.gpus_per_replica, topology_->gpus_per_node());
  const auto num_shared = static_cast<int32_t>(moe->num_shared_experts);
  const std::string src = sc_.source_file + ": deployment";
  return std::make_unique<ExpertPlacement>(
      d.placement == PlacementLayout::kContiguous
          ? ExpertPlacement::contiguous(shape.num_experts, d.gpus_per_replica, gpus_per_node,
                                        num_shared, src)
          : ExpertPlacement::strided(shape.num_experts, d.gpus_per_replica, gpus_per_node,
                                     num_shared, src));
}

GpuMemoryInputs ReplicaBuilder::memory_inputs(const ModelCard& card,
                                              const ExpertPlacement* placement) const {
  const DeploymentSpec& d = sc_.deployment;
  GpuMemoryInputs mem;
  mem.hbm_bytes = topology_->gpu_spec().hbm_bytes;
  mem.attention_tp = d.attention == AttentionParallel::kTensor ? d.attention_tp : 1;
  mem.kv_block_tokens = sc_.scheduler.kv_block_tokens;
  mem.workspace_bytes = static_cast<int64_t>(sc_.scheduler.workspace_gib * (1LL << 30));
  mem.reserve_fraction = sc_.scheduler.hbm_reserve_fraction;
  if (placement) {
    mem.routed_expert_slots =
        static_cast<int64_t>(placement->max_slots_per_gpu()) * num_moe_layers(card);
  }
  return mem;
}

GpuMemoryLayout ReplicaBuilder::memory_layout(const ModelCard& card,
                                              const ExpertPlacement* placement,
                                              const std::string& key_path,
                                              const std::string& what) const {
  std::string error;
  GpuMemoryLayout layout = compute_gpu_memory_layout(card, memory_inputs(card, placement), &error);
  if (!error.empty()) throw ConfigError(sc_.source_file, 0, 0, key_path, what + " " + error);
  return layout;
}

std::unique_ptr<NetworkModel> ReplicaBuilder::make_network() const {
  return builtin_network_models().make(sc_.network_model, *topology_);
}

std::unique_ptr<RoutingModel> ReplicaBuilder::make_routing(uint64_t seed) const {
  return make_routing(sc_.routing, seed);
}

std::unique_ptr<RoutingModel> ReplicaBuilder::make_routing(const RoutingSpec& spec,
                                                           uint64_t seed) const {
  return std::make_unique<SyntheticRoutingModel>(routing_shape_of(*sc_.model), spec, seed);
}

std::unique_ptr<StepModel> ReplicaBuilder::make_step_model(const ModelCard& card,
                                                           std::vector<GpuId> gpus,
                                                           const ExpertPlacement* placement,
                                                           NetworkModel* network,
                                                           RoutingModel* routing) const {
  return std::make_unique<StepModel>(card, *topology_, sc_.deployment, std::move(gpus), placement,
                                     *cost_, network, routing);
}

ReplicaParts ReplicaBuilder::build(int32_t replica_idx, uint64_t root_seed) const {
  ReplicaParts p;
  p.gpus = replica_gpus(replica_idx);
  if (num_moe_layers(*sc_.model) > 0) {
    p.routing = make_routing(routing_seed(root_seed, replica_idx));
    p.network = make_network();
    p.placement = static_placement();
  }
  p.step_model =
      make_step_model(*sc_.model, p.gpus, p.placement.get(), p.network.get(), p.routing.get());
  return p;
}

}  // namespace moesim::sim
