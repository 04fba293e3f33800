#include "sim/serving/replica_builder.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <utility>

#include "sim/config/config_error.h"
#include "sim/core/rng.h"
#include "sim/cost/cost_model_factory.h"
#include "sim/metrics/figure_text.h"
#include "sim/placement/eplb.h"
#include "sim/routing/synthetic_routing.h"
#include "sim/serving/network_models.h"
#include "sim/serving/speculative.h"

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
      cost_(make_cost_model(scenario.cost, topology_->gpu_spec())),
      expert_memo_(ExpertMemoTable::make(*scenario.model, *cost_)) {}

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
  MOESIM_CHECK(d.placement != PlacementLayout::kEplb, "a layout shared by every MoE layer");
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

std::unique_ptr<LayerPlacements> ReplicaBuilder::static_placements(RoutingModel* routing) const {
  const ModelCard& card = *sc_.model;
  const MoeSpec* moe = first_moe(card);
  if (!moe) return nullptr;
  const auto num_moe = static_cast<int32_t>(num_moe_layers(card));
  const DeploymentSpec& d = sc_.deployment;
  if (d.placement != PlacementLayout::kEplb) {
    return std::make_unique<LayerPlacements>(num_moe, *static_placement());
  }
  MOESIM_CHECK(routing != nullptr, "an EPLB placement profiles a routing model");
  const RoutingShape shape = routing_shape_of(card);
  // Profiled loads: the scenario's recorded ones (eplb_loads), else the routing model's
  // expected shares at step 0; a layer without any is balanced as uniform.
  std::vector<std::vector<double>> loads(static_cast<size_t>(num_moe));
  for (int32_t l = 0; l < num_moe; ++l) {
    if (d.eplb_loads) {
      loads[l] = (*d.eplb_loads)[l];
    } else {
      const std::span<const double> pi = routing->expected_shares(l, 0);
      loads[l].assign(pi.begin(), pi.end());
    }
    double total = 0.0;
    for (double x : loads[l]) total += x;
    if (total <= 0.0) loads[l].assign(static_cast<size_t>(shape.num_experts), 1.0);
  }
  const int32_t gpus_per_node = std::min(d.gpus_per_replica, topology_->gpus_per_node());
  EplbShape es;
  es.num_experts = shape.num_experts;
  es.num_physical_slots = shape.num_experts + d.redundant_slots;
  es.num_groups = static_cast<int32_t>(std::max<int64_t>(1, moe->num_expert_groups));
  es.num_nodes = d.gpus_per_replica / gpus_per_node;
  es.num_gpus = d.gpus_per_replica;
  const std::vector<ExpertPlacement> layers =
      balance_placements(loads, es, gpus_per_node, static_cast<int32_t>(moe->num_shared_experts));
  auto out = std::make_unique<LayerPlacements>(num_moe, layers.front());
  for (int32_t l = 1; l < num_moe; ++l) out->set_layer(l, layers[l]);
  return out;
}

GpuMemoryInputs ReplicaBuilder::memory_inputs(const ModelCard& card,
                                              const LayerPlacements* placements) const {
  const DeploymentSpec& d = sc_.deployment;
  GpuMemoryInputs mem;
  mem.hbm_bytes = topology_->gpu_spec().hbm_bytes;
  mem.attention_tp = d.attention == AttentionParallel::kTensor ? d.attention_tp : 1;
  mem.kv_block_tokens = sc_.scheduler.kv_block_tokens;
  mem.workspace_bytes = static_cast<int64_t>(sc_.scheduler.workspace_gib * (1LL << 30));
  mem.reserve_fraction = sc_.scheduler.hbm_reserve_fraction;
  if (placements) mem.routed_expert_slots = placements->max_total_slots_per_gpu();
  if (sc_.speculative.enabled && sc_.speculative.draft_gpus == 0) {
    // MTP modules' experts spread like one MoE layer's: the fullest GPU's slots per layer. A draft
    // model on GPUs of its own takes nothing on the target's (check_draft_gpus).
    const int64_t layers = placements ? placements->num_layers() : 1;
    const int64_t slots = (mem.routed_expert_slots + layers - 1) / layers;
    const DraftMemory draft = draft_memory(sc_.speculative, card, mem.attention_tp, slots);
    mem.draft_weight_bytes = draft.weight_bytes;
    mem.draft_kv_bytes_per_token = draft.kv_bytes_per_token;
  }
  return mem;
}

std::vector<GpuId> ReplicaBuilder::draft_gpus(int32_t replica) const {
  const DeploymentSpec& d = sc_.deployment;
  const int32_t n = sc_.speculative.draft_gpus;
  std::vector<GpuId> out;
  const int32_t first = d.num_replicas * d.gpus_per_replica + replica * n;
  for (int32_t j = 0; j < n; ++j) out.emplace_back(first + j);
  return out;
}

void ReplicaBuilder::cap_kv_pool_for_draft_gpus(GpuMemoryLayout& layout, int32_t num_ranks) const {
  const SpeculativeSpec& spec = sc_.speculative;
  if (!spec.enabled || spec.draft_gpus <= 0) return;
  const DraftMemory draft = draft_model_memory(*spec.draft_model);
  const double hbm = static_cast<double>(topology_->gpu_spec().hbm_bytes);
  const double room = hbm * (1.0 - sc_.scheduler.hbm_reserve_fraction) -
                      sc_.scheduler.workspace_gib * static_cast<double>(1LL << 30) -
                      draft.weight_bytes;
  // Draft KV bytes of one KV block of every rank, spread over the draft GPUs.
  const double per_block = draft.kv_bytes_per_token *
                           static_cast<double>(sc_.scheduler.kv_block_tokens) * num_ranks /
                           spec.draft_gpus;
  const double cap = per_block > 0 ? std::floor(room / per_block) : 1e18;
  if (!(room > 0) || cap < 1) {
    throw ConfigError(sc_.source_file, 0, 0, "speculative.draft_gpus",
                      std::to_string(spec.draft_gpus) + " draft GPU(s) per replica cannot hold '" +
                          spec.draft_model->name + "' (weights " + bytes_text(draft.weight_bytes) +
                          ") and the draft KV of one KV block per rank (" + bytes_text(per_block) +
                          " per GPU) in the " +
                          bytes_text(std::max(0.0, room + draft.weight_bytes)) +
                          " of HBM left after workspace and reserve");
  }
  if (cap < static_cast<double>(layout.num_kv_blocks)) {
    layout.num_kv_blocks = static_cast<int64_t>(cap);
    layout.kv_pool_bytes = static_cast<double>(layout.num_kv_blocks) * layout.kv_block_bytes;
  }
}

GpuMemoryLayout ReplicaBuilder::memory_layout(const ModelCard& card,
                                              const LayerPlacements* placements,
                                              const std::string& key_path,
                                              const std::string& what) const {
  std::string error;
  GpuMemoryLayout layout = compute_gpu_memory_layout(card, memory_inputs(card, placements), &error);
  if (!error.empty()) throw ConfigError(sc_.source_file, 0, 0, key_path, what + " " + error);
  const DeploymentSpec& d = sc_.deployment;
  const int32_t tp = d.attention == AttentionParallel::kTensor ? d.attention_tp : 1;
  cap_kv_pool_for_draft_gpus(layout, d.gpus_per_replica / tp);
  return layout;
}

std::unique_ptr<NetworkModel> ReplicaBuilder::make_network() const {
  // Models share what they derive from the topology (G^2 route tables: 420 MB at 4,096 GPUs)
  // where the kind can: a fresh copy of the first model made.
  // A kind that cannot share is not kept (SimGrid allows one engine per process).
  if (network_prototype_) return network_prototype_->fresh_copy();
  std::unique_ptr<NetworkModel> model =
      builtin_network_models().make(sc_.network_model, *topology_);
  std::unique_ptr<NetworkModel> copy = model->fresh_copy();
  if (!copy) return model;
  network_prototype_ = std::move(model);
  return copy;
}

std::unique_ptr<RoutingModel> ReplicaBuilder::make_routing(uint64_t seed) const {
  return make_routing(sc_.routing, seed);
}

std::unique_ptr<RoutingModel> ReplicaBuilder::make_routing(const RoutingSpec& spec,
                                                           uint64_t seed) const {
  return std::make_unique<SyntheticRoutingModel>(routing_shape_of(*sc_.model), spec, seed);
}

std::unique_ptr<RoutingModel> ReplicaBuilder::make_replica_routing(int32_t replica_idx,
                                                                   uint64_t root_seed) const {
  // Every replica sees the popularity replica 0 draws (one object: each layer's shares computed
  // once for all of them) and draws its own routing per step.
  const uint64_t popularity_seed = routing_seed(root_seed, 0);
  if (!popularity_ || popularity_->seed() != popularity_seed) {
    popularity_ = std::make_shared<SyntheticPopularity>(routing_shape_of(*sc_.model), sc_.routing,
                                                        popularity_seed);
  }
  return std::make_unique<SyntheticRoutingModel>(popularity_, routing_seed(root_seed, replica_idx));
}

StepModelOptions ReplicaBuilder::step_model_options(const ModelCard& card,
                                                    const StepModelUse& use) const {
  StepModelOptions o;
  const bool fast = sc_.run.fidelity == Fidelity::kFast;
  o.fidelity = fast != use.other_fidelity ? Fidelity::kFast : Fidelity::kExact;
  if (sc_.deployment.dispatch == DispatchAlgorithm::kLowLatency &&
      sc_.cost.kind == CostModelKind::kCalibrated && sc_.cost.profile) {
    // The low-latency kernels' fixed cost from the profile's [[network.kernel]] fits.
    const NetworkCalibration& net = sc_.cost.profile->network;
    o.dispatch_kernel = kernel_cost(net, kLowLatencyDispatchKernel, LowLatencyTransport::kNvlink);
    o.combine_kernel = kernel_cost(net, kLowLatencyCombineKernel, LowLatencyTransport::kNvlink);
  }
  if (use.speculative && sc_.speculative.enabled) {
    o.speculative.num_draft_tokens = sc_.speculative.num_draft_tokens;
    o.speculative.draft_model = sc_.speculative.draft_model.get();  // null: MTP
    if (sc_.speculative.draft_gpus > 0) o.speculative.draft_gpus = draft_gpus(use.replica_idx);
  }
  o.report_expert_loads = use.report_expert_loads;
  o.track_nic_bytes = use.track_nic_bytes;
  o.background = use.background;
  o.background_chunk_bytes =
      use.background ? sc_.scheduler.weight_transfer_chunk_mib * 1048576.0 : 0.0;
  // The replicas of the scenario's card share one routed-expert memo (one table warm in cache).
  if (&card == sc_.model.get()) o.expert_memo = expert_memo_;
  return o;
}

std::unique_ptr<StepModel> ReplicaBuilder::make_step_model(
    const ModelCard& card, std::vector<GpuId> gpus, const LayerPlacements* placements,
    NetworkModel* network, RoutingModel* routing, const StepModelOptions& options) const {
  return std::make_unique<StepModel>(card, *topology_, sc_.deployment, std::move(gpus), placements,
                                     *cost_, network, routing, options);
}

std::unique_ptr<StepModel> ReplicaBuilder::make_step_model(const ModelCard& card,
                                                           std::vector<GpuId> gpus,
                                                           const LayerPlacements* placements,
                                                           NetworkModel* network,
                                                           RoutingModel* routing) const {
  return make_step_model(card, std::move(gpus), placements, network, routing,
                         step_model_options(card, {}));
}

ReplicaParts ReplicaBuilder::build(int32_t replica_idx, uint64_t root_seed) const {
  ReplicaParts p;
  p.gpus = replica_gpus(replica_idx);
  if (num_moe_layers(*sc_.model) > 0) {
    p.routing = make_replica_routing(replica_idx, root_seed);
    p.network = make_network();
    p.placements = static_placements(p.routing.get());
  }
  p.step_model =
      make_step_model(*sc_.model, p.gpus, p.placements.get(), p.network.get(), p.routing.get());
  return p;
}

void ReplicaBuilder::make_step_models(Replica& r, const ModelCard& card, RoutingModel* routing,
                                      const ReplicaRunSetup& setup) const {
  StepModelUse use;
  use.replica_idx = r.idx;
  use.speculative = true;
  use.report_expert_loads = setup.report_expert_loads;
  use.track_nic_bytes = setup.kv_tiers != nullptr;
  use.background = r.transfers.get();
  r.parts.step_model = make_step_model(card, r.gpus(), r.placements(), r.parts.network.get(),
                                       routing, step_model_options(card, use));
  if (!r.check.network) return;
  // The check replica: the other fidelity over the same GPUs, placements and routing (synthetic
  // routing depends on (seed, layer, step, tokens) only), reporting nothing.
  StepModelUse check_use;
  check_use.replica_idx = r.idx;
  check_use.speculative = true;
  check_use.other_fidelity = true;
  r.check.step_model = make_step_model(card, r.gpus(), r.placements(), r.check.network.get(),
                                       routing, step_model_options(card, check_use));
}

std::vector<Replica> ReplicaBuilder::build_replicas(const ReplicaRunSetup& setup) const {
  const DeploymentSpec& d = sc_.deployment;
  const ModelCard& card = *sc_.model;
  const int32_t tp = d.attention == AttentionParallel::kTensor ? d.attention_tp : 1;
  const int32_t num_ranks = d.gpus_per_replica / tp;
  std::vector<Replica> replicas;
  replicas.reserve(static_cast<size_t>(d.num_replicas));
  for (int32_t ri = 0; ri < d.num_replicas; ++ri) {
    Replica r;
    r.idx = ri;
    r.parts.gpus = replica_gpus(ri);
    if (num_moe_layers(card) > 0) {
      r.parts.routing = make_replica_routing(ri, setup.root_seed);
      r.parts.network = make_network();
      r.parts.placements = static_placements(r.parts.routing.get());
      if (setup.check_fidelity) r.check.network = make_network();
    }
    // Every replica holds the same slots per GPU (a static layout, or EPLB filling every GPU's
    // slots evenly in every layer): the first replica's layout is every replica's.
    r.layout = ri == 0 ? memory_layout(card, r.placements(), "deployment",
                                       card.name + " on " + topology_->gpu_spec().name + " with " +
                                           std::to_string(d.gpus_per_replica) + " GPUs per replica")
                       : replicas.front().layout;
    if (sc_.speculative.enabled) r.draft_gpus = draft_gpus(ri);
    make_step_models(r, card, r.parts.routing.get(), setup);
    r.scheduler =
        std::make_unique<ReplicaScheduler>(sc_.scheduler, num_ranks, r.layout, setup.seqs);
    if (sc_.speculative.enabled) r.scheduler->set_draft_tokens(sc_.speculative.num_draft_tokens);
    if (setup.kv_tiers) {
      std::vector<int32_t> nodes, gpus;
      for (int32_t k = 0; k < num_ranks; ++k) {
        const GpuId first = r.gpus()[k * tp];
        nodes.push_back(topology_->node_of(first).value);
        gpus.push_back(first.value);
      }
      r.scheduler->set_kv_tiers(setup.kv_tiers, std::move(nodes), std::move(gpus), tp);
    }
    r.prefill_only = d.prefill_replicas > 0 && ri < d.prefill_replicas;
    r.decode_only = d.prefill_replicas > 0 && ri >= d.prefill_replicas;
    if (r.placements()) r.layout_total_slots = r.placements()->max_total_slots_per_gpu();
    r.placement_extra_blocks.assign(static_cast<size_t>(num_ranks), 0);
    replicas.push_back(std::move(r));
  }
  return replicas;
}

void ReplicaBuilder::fill_gpu_memory(const Replica& replica, GpuRecord& rec) {
  const GpuMemoryLayout& layout = replica.layout;
  rec.weight_bytes = layout.weight_bytes();
  rec.routed_expert_slots = replica.layout_total_slots;
  rec.num_moe_layers = replica.placements() ? replica.placements()->num_layers() : 0;
  rec.routed_expert_weight_bytes = layout.routed_expert_weight_bytes;
  rec.kv_pool_bytes = layout.kv_pool_bytes;
  rec.num_kv_blocks = layout.num_kv_blocks;
  rec.kv_block_bytes = layout.kv_block_bytes;
}

std::vector<GpuRecord> ReplicaBuilder::gpu_records(const std::vector<Replica>& replicas) const {
  std::vector<GpuRecord> out;
  for (const Replica& r : replicas) {
    for (GpuId g : r.gpus()) {
      GpuRecord rec;
      rec.gpu = g.value;
      rec.replica = r.idx;
      fill_gpu_memory(r, rec);
      out.push_back(rec);
    }
  }
  // Draft GPUs of their own follow every replica's GPUs, in id order: each holds the whole draft
  // model (its draft KV is what caps the replicas' KV pools).
  for (const Replica& r : replicas) {
    if (sc_.speculative.draft_gpus <= 0) break;
    for (GpuId g : draft_gpus(r.idx)) {
      GpuRecord rec;
      rec.gpu = g.value;
      rec.replica = r.idx;
      rec.weight_bytes = draft_model_memory(*sc_.speculative.draft_model).weight_bytes;
      out.push_back(rec);
    }
  }
  return out;
}

void ReplicaBuilder::rebuild(Replica& r, const ModelCard& card, const ExpertPlacement& placement,
                             RoutingModel* routing, const ReplicaRunSetup& setup) const {
  MOESIM_CHECK(r.placements() != nullptr && routing != nullptr, "a replica with MoE layers");
  MOESIM_CHECK(placement.num_gpus() == static_cast<int32_t>(r.gpus().size()), "the replica's GPUs");
  LayerPlacements placements(static_cast<int32_t>(num_moe_layers(card)), placement);
  r.layout = memory_layout(
      card, &placements, "policies",
      card.name + " with replaced routed experts on replica " + std::to_string(r.idx));
  r.layout_total_slots = placements.max_total_slots_per_gpu();
  *r.parts.placements = std::move(placements);
  r.scheduler->reset_memory(r.layout);
  ++r.placement_version;
  std::fill(r.placement_extra_blocks.begin(), r.placement_extra_blocks.end(), 0);
  make_step_models(r, card, routing, setup);
}

}  // namespace moesim::sim
