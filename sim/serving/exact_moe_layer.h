// The exact fidelity's MoE layer: the routing drawn as selections per (source GPU, destination GPU)
// (per expert and dispatched by the token-to-replica rule where the layer has replicas), unique
// tokens per pair (unique_tokens.h, clamped to what the counts allow), the traffic plan of the
// deployment's dispatch algorithm (background transfers riding along), and both collectives
// timed by the network model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/network/node_limited_routing.h"
#include "sim/network/traffic_matrix.h"
#include "sim/network/traffic_plan.h"
#include "sim/placement/expert_placement.h"
#include "sim/routing/count_matrix.h"
#include "sim/serving/moe_layer_model.h"

namespace moesim::sim {

class ExactMoeLayer final : public MoeLayerModel {
 public:
  explicit ExactMoeLayer(const MoeLayerDeps& deps);

  CollectiveTimes run(const MoeLayerCall& call, StepState& state) override;
  void begin_microbatches() override;
  void split_microbatch(int32_t mb, std::span<const int64_t> whole_tokens,
                        std::span<const int64_t> mb0_tokens, int64_t whole_sum,
                        int64_t mb0_sum) override;
  CollectiveTimes time_microbatch(int32_t mb, const MoeSpec& m, StepState& state) override;
  // Also reports the layer's routing to call.observer (the micro-batches' bytes summed).
  void end_microbatches(const MoeLayerCall& call, const CollectiveTimes& total,
                        StepState& state) override;
  std::span<const int64_t> selections() const override { return dst_selections_; }

 private:
  // Draws the layer's routing into src_dst_ and refreshes the pricer's slots.
  void route(const MoeLayerCall& call, const StepState& state);
  // Unique tokens per (source, destination) into token_counts_; dst_selections_.
  void count_unique_tokens(int64_t top_k, const StepState& state);
  // The dispatch, then the combine, of token_counts_ on the network model into `t` (background
  // transfers join the dispatch when `with_background`).
  void run_dispatch(bool with_background, StepState& state, CollectiveTimes& t);
  void run_combine(StepState& state, CollectiveTimes& t);
  void add_background_traffic();

  MoeLayerDeps deps_;
  CountMatrix src_expert_, src_dst_, mb_src_dst_;
  ReplicaDispatcher dispatcher_;
  bool dispatched_per_expert_ = false;  // the last route() used dispatcher_
  TokenCounts token_counts_;
  uint64_t counts_tokens_version_ = 0;  // token_counts_.tokens_per_src's state.tokens_version
  std::vector<int32_t> node_limit_scratch_;
  TrafficPlan plan_;
  TrafficMatrix traffic_;
  CollectiveResult collective_;
  std::vector<int64_t> dst_selections_, whole_dst_selections_;
};

}  // namespace moesim::sim
