// Shared by the step-model and MoE-layer tests: a fixed routing (every selection on one GPU, or
// spread evenly; its per-destination totals are the exact matrix's column sums), and a MoE-layer
// model of either fidelity on one 8-GPU NVLink node with the tiny card.
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

// Routing that sends every selection to one GPU (hot_gpu >= 0; that GPU must host >= top_k
// experts), or spreads them evenly over the GPUs (hot_gpu < 0). States `expected` as its
// expected shares (none by default) and, with `destinations`, that route_to_gpus() reports the
// destinations replicas included.
class FixedRouting final : public RoutingModel {
 public:
  FixedRouting(RoutingShape shape, int32_t hot_gpu) : shape_(shape), hot_gpu_(hot_gpu) {}
  const RoutingShape& shape() const override { return shape_; }
  void route(const RoutingQuery& q, CountMatrix& out) override {
    const int32_t n = static_cast<int32_t>(q.tokens_per_src.size());
    out.reset(n, shape_.num_experts);
    for (int32_t s = 0; s < n; ++s) {
      for (int64_t i = 0; i < int64_t{q.tokens_per_src[s]} * shape_.top_k; ++i) {
        out.at(s, static_cast<int32_t>(i % shape_.num_experts))++;
      }
    }
  }
  void route_to_gpus(const RoutingQuery& q, std::span<const int32_t> gpu_of_expert,
                     int32_t num_dst_gpus, CountMatrix& out) override {
    const int32_t n = static_cast<int32_t>(q.tokens_per_src.size());
    out.reset(n, num_dst_gpus);
    for (int32_t s = 0; s < n; ++s) {
      const int32_t total = q.tokens_per_src[s] * shape_.top_k;
      if (hot_gpu_ >= 0) {
        out.at(s, hot_gpu_) = total;
        continue;
      }
      for (int32_t d = 0; d < num_dst_gpus; ++d) {
        out.at(s, d) = total / num_dst_gpus + (d < total % num_dst_gpus ? 1 : 0);
      }
    }
  }
  // route_to_gpus()'s column sums (the fast fidelity's query).
  bool route_totals_to_gpus(const RoutingQuery& q, std::span<const int32_t> gpu_of_expert,
                            int32_t num_dst_gpus, std::vector<int64_t>& totals) override {
    CountMatrix m;
    route_to_gpus(q, gpu_of_expert, num_dst_gpus, m);
    totals.assign(num_dst_gpus, 0);
    for (int32_t s = 0; s < m.num_rows(); ++s) {
      for (int32_t d = 0; d < num_dst_gpus; ++d) totals[d] += m.at(s, d);
    }
    return true;
  }
  bool reports_destinations() const override { return destinations; }
  std::span<const double> expected_shares(int32_t, int64_t) override { return expected; }

  std::vector<double> expected;
  bool destinations = false;

 private:
  RoutingShape shape_;
  int32_t hot_gpu_;
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
    routing = std::make_unique<FixedRouting>(shape, -1);
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
