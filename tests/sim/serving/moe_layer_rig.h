// A MoE-layer model of either fidelity on one 8-GPU NVLink node with the tiny card, and a routing
// that spreads every source's selections evenly over the GPUs (its per-destination totals are the
// exact matrix's column sums): the rig the exact and fast MoE-layer tests share.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/cost/roofline.h"
#include "sim/model/model_card_parser.h"
#include "sim/network/network_model.h"
#include "sim/serving/exact_moe_layer.h"
#include "sim/serving/fast_moe_layer.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim::testing {

// Every source's tokens x top_k selections spread evenly over the destination GPUs.
class EvenRouting final : public RoutingModel {
 public:
  explicit EvenRouting(RoutingShape shape) : shape_(shape) {}
  const RoutingShape& shape() const override { return shape_; }
  void route(const RoutingQuery& q, CountMatrix& out) override {
    const auto n = static_cast<int32_t>(q.tokens_per_src.size());
    out.reset(n, shape_.num_experts);
    for (int32_t s = 0; s < n; ++s) {
      for (int64_t i = 0; i < int64_t{q.tokens_per_src[s]} * shape_.top_k; ++i) {
        out.at(s, static_cast<int32_t>(i % shape_.num_experts))++;
      }
    }
  }
  void route_to_gpus(const RoutingQuery& q, std::span<const int32_t>, int32_t num_dst,
                     CountMatrix& out) override {
    const auto n = static_cast<int32_t>(q.tokens_per_src.size());
    out.reset(n, num_dst);
    for (int32_t s = 0; s < n; ++s) {
      const int32_t total = q.tokens_per_src[s] * shape_.top_k;
      for (int32_t d = 0; d < num_dst; ++d) {
        out.at(s, d) = total / num_dst + (d < total % num_dst ? 1 : 0);
      }
    }
  }
  bool route_totals_to_gpus(const RoutingQuery& q, std::span<const int32_t> gpu_of_expert,
                            int32_t num_dst, std::vector<int64_t>& totals) override {
    CountMatrix m;
    route_to_gpus(q, gpu_of_expert, num_dst, m);
    totals.assign(num_dst, 0);
    for (int32_t s = 0; s < m.num_rows(); ++s) {
      for (int32_t d = 0; d < num_dst; ++d) totals[d] += m.at(s, d);
    }
    return true;
  }

 private:
  RoutingShape shape_;
};

inline const ModelCard& tiny() {
  static const ModelCard card =
      load_model_card(std::string(MOESIM_SOURCE_DIR) + "/models/tiny.toml");
  return card;
}

// One MoE-layer model of either fidelity with everything it works with.
struct LayerRig {
  explicit LayerRig(bool fast, StepModelOptions o = {})
      : topology(build_topology(nvlink_node_spec("h200-sxm", 8, 360e9))),
        cost(topology.gpu_spec(), RooflineParams::defaults()),
        options(std::move(o)) {
    deployment.gpus_per_replica = 8;
    for (int32_t g = 0; g < 8; ++g) gpus.emplace_back(g);
    const RoutingShape shape = routing_shape_of(tiny());
    placements = std::make_unique<LayerPlacements>(
        shape.num_moe_layers, ExpertPlacement::contiguous(shape.num_experts, 8, 8, 1, "test"));
    network = NetworkModelRegistry().make("bottleneck", topology);
    routing = std::make_unique<EvenRouting>(shape);
    pricer = std::make_unique<ExpertPricer>(tiny(), cost, 8, nullptr);
    reporter = std::make_unique<LoadReporter>(tiny(), *placements, *routing);
    const MoeLayerDeps deps{tiny(),   topology, deployment, gpus,      *placements,
                            *network, *routing, *pricer,    *reporter, options,
                            nullptr,  7168.0,   14336.0};
    if (fast) {
      model = std::make_unique<FastMoeLayer>(deps);
    } else {
      model = std::make_unique<ExactMoeLayer>(deps);
    }
    state.resize(8, 1);
    for (int32_t g = 0; g < 8; ++g) {
      state.gpu_tokens[g] = 64;
      state.src_tokens[g] = 64;
      state.rank_tokens[g] = 64;
    }
    state.step_tokens = 8 * 64;
    ++state.tokens_version;
    state.begin(false);
  }
  CollectiveTimes run() {
    const MoeSpec& moe = tiny().layers[1].ffn.moe;
    return model->run(MoeLayerCall{0, 1, 0, &moe, false, false, nullptr}, state);
  }

  Topology topology;
  RooflineCostModel cost;
  DeploymentSpec deployment;
  StepModelOptions options;
  std::vector<GpuId> gpus;
  std::unique_ptr<LayerPlacements> placements;
  std::unique_ptr<NetworkModel> network;
  std::unique_ptr<RoutingModel> routing;
  std::unique_ptr<ExpertPricer> pricer;
  std::unique_ptr<LoadReporter> reporter;
  std::unique_ptr<MoeLayerModel> model;
  StepState state;
};

}  // namespace moesim::sim::testing
