#include "sim/serving/layer_study.h"

#include <map>
#include <string>

#include "sim/calibration/cost_model_factory.h"
#include "sim/config/config_error.h"
#include "sim/network/network_model.h"
#include "sim/placement/expert_placement.h"
#include "sim/routing/synthetic_routing.h"
#include "sim/serving/step_model.h"

namespace moesim::sim {
namespace {

// Sums the step model's spans by name over GPUs and MoE layers.
class SpanTotals final : public StepObserver {
 public:
  explicit SpanTotals(int32_t num_gpus) : per_gpu_experts_(num_gpus, 0) {}
  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                SimTime duration_ns) override {
    std::string n(name);
    if (n == "experts") {
      per_gpu_experts_[gpu_idx] += static_cast<double>(duration_ns);
    } else if (n == "wait") {
      wait_ns_ += static_cast<double>(duration_ns);
    } else if ((n == "dispatch" || n == "combine") && gpu_idx == 0) {
      comm_ns_ += static_cast<double>(duration_ns);
    }
  }
  std::vector<double> per_gpu_experts_;
  double wait_ns_ = 0;
  double comm_ns_ = 0;
};

}  // namespace

std::vector<LayerStudyRow> run_layer_study(const Scenario& sc,
                                           const std::vector<int64_t>& seqs_per_gpu,
                                           int64_t context_tokens, uint64_t seed) {
  const ModelCard& card = *sc.model;
  const int64_t num_moe = num_moe_layers(card);
  if (num_moe == 0) throw ConfigError(sc.source_file, 0, 0, "model", "the model has no MoE layer");
  const DeploymentSpec& d = sc.deployment;
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe) {
      moe = &l.ffn.moe;
      break;
    }
  }
  RoutingShape shape = routing_shape_of(card);
  ExpertPlacement placement =
      d.placement == PlacementLayout::kContiguous
          ? ExpertPlacement::contiguous(shape.num_experts, d.gpus_per_replica,
                                        std::min(d.gpus_per_replica, sc.topology->gpus_per_node()),
                                        static_cast<int32_t>(moe->num_shared_experts),
                                        sc.source_file)
          : ExpertPlacement::strided(shape.num_experts, d.gpus_per_replica,
                                     std::min(d.gpus_per_replica, sc.topology->gpus_per_node()),
                                     static_cast<int32_t>(moe->num_shared_experts), sc.source_file);
  std::vector<GpuId> gpus;
  for (int32_t g = 0; g < d.gpus_per_replica; ++g) gpus.emplace_back(g);
  auto cost = make_cost_model(sc.cost, sc.topology->gpu_spec());
  NetworkModelRegistry registry;
  const std::shared_ptr<const Topology> net_topology = make_network_topology(sc.cost, sc.topology);
  auto network =
      registry.make(sc.network_model == "simgrid" ? "bottleneck" : sc.network_model, *net_topology);
  const int32_t tp = d.attention == AttentionParallel::kTensor ? d.attention_tp : 1;
  const int32_t num_ranks = d.gpus_per_replica / tp;
  std::vector<LayerStudyRow> rows;
  for (bool skewed : {true, false}) {
    RoutingSpec spec = skewed ? sc.routing : routing_preset("uniform");
    for (int64_t n : seqs_per_gpu) {
      SyntheticRoutingModel routing(shape, spec, seed);
      StepModel model(card, *sc.topology, d, gpus, &placement, *cost, network.get(), &routing);
      std::vector<std::vector<SeqSlice>> ranks(num_ranks);
      for (auto& r : ranks)
        r.assign(static_cast<size_t>(n * tp), SeqSlice{1, context_tokens, false});
      SpanTotals spans(d.gpus_per_replica);
      const StepResult& res = model.run(0, ranks, &spans);
      LayerStudyRow row;
      row.seqs_per_gpu = n;
      row.skewed = skewed;
      double max_e = 0, sum_e = 0;
      for (double e : spans.per_gpu_experts_) {
        max_e = std::max(max_e, e);
        sum_e += e;
      }
      const double layers = static_cast<double>(num_moe);
      row.comm_us = spans.comm_ns_ / layers / 1e3;
      row.expert_max_us = max_e / layers / 1e3;
      row.expert_mean_us = sum_e / static_cast<double>(d.gpus_per_replica) / layers / 1e3;
      row.wait_mean_us = spans.wait_ns_ / static_cast<double>(d.gpus_per_replica) / layers / 1e3;
      row.step_ms = to_ms(res.duration_ns);
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace moesim::sim
