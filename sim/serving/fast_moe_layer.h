// The fast fidelity's MoE layer (docs/fast_fidelity.md): the routing drawn as per-destination
// totals (replicated experts by the token-to-replica rule on per-expert totals, ReplicaDispatcher::
// dispatch_totals), each destination's reach from its totals (unique_tokens.h) and both
// collectives timed by FastAllToAll from per-GPU sums. A layer stays on the exact fidelity
// (ExactMoeLayer, held here) where the fast one does not apply: a background transfer in flight,
// a routing model without totals (a replay, pruned routing), participants FastAllToAll refuses.
// No (source, destination) matrix is drawn, so StepObserver::on_routing is not called for fast
// layers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/network/fast_all_to_all.h"
#include "sim/placement/expert_placement.h"
#include "sim/serving/exact_moe_layer.h"
#include "sim/serving/moe_layer_model.h"

namespace moesim::sim {

class FastMoeLayer final : public MoeLayerModel {
 public:
  // The candidate draw (RoutingQuery::candidate_epsilon) for layers without replicas: per layer,
  // at most this chance that a GPU priced at its expected selections would have drawn more than
  // the likeliest GPU (docs/fast_fidelity.md, "Candidate draw").
  static constexpr double kCandidateEpsilon = 1e-6;

  explicit FastMoeLayer(const MoeLayerDeps& deps);

  // Fast layers count in StepTotals::num_fast_layers, those left to the exact fidelity in
  // num_exact_layers.
  CollectiveTimes run(const MoeLayerCall& call, StepState& state) override;
  void begin_microbatches() override;
  void split_microbatch(int32_t mb, std::span<const int64_t> whole_tokens,
                        std::span<const int64_t> mb0_tokens, int64_t whole_sum,
                        int64_t mb0_sum) override;
  CollectiveTimes time_microbatch(int32_t mb, const MoeSpec& m, StepState& state) override;
  void end_microbatches(const MoeLayerCall& call, const CollectiveTimes& total,
                        StepState& state) override;
  std::span<const int64_t> selections() const override {
    return last_fast_ ? std::span<const int64_t>(dst_selections_) : exact_.selections();
  }

  // Per replica GPU factors >= 1 by which its NIC link's time per byte grows in the following
  // layers (empty: none).
  void set_nic_slowdown(std::span<const double> in, std::span<const double> out) {
    fast_.set_nic_slowdown(in, out);
  }
  // Why the fast fidelity can never apply to this replica's collectives ("" when it can).
  const std::string& why_not() const { return fast_.why_not(); }

 private:
  // The fast routing, pricing and collectives of one layer; false (nothing reported) where the
  // layer needs the exact fidelity.
  bool run_fast(const MoeLayerCall& call, StepState& state, CollectiveTimes& t);
  // The replicated layer's per-destination totals (dispatch_totals over source groups).
  bool route_replicated(const RoutingQuery& q, const ExpertPlacement& placement,
                        const StepState& state);
  // fast_tokens_ (state.gpu_tokens as doubles) and their sum, per tokens version.
  void fill_fast_tokens(const StepState& state);
  // Times the last load()'s collectives.
  CollectiveTimes seconds() const;

  MoeLayerDeps deps_;
  ExactMoeLayer exact_;
  FastAllToAll fast_;
  NodeLimit node_limit_;
  std::vector<int32_t> node_limit_scratch_;
  ReplicaDispatcher dispatcher_;
  bool last_fast_ = false;      // the last run() was fast (else exact_ ran it)
  bool last_replicas_ = false;  // ... on a placement with replicas
  std::vector<int64_t> dst_selections_, whole_dst_selections_;
  std::vector<double> fast_tokens_, fast_reach_, fast_remote_reach_;
  uint64_t fast_tokens_version_ = 0;
  int64_t fast_token_sum_ = 0;
  std::vector<int64_t> expert_totals_, node_tokens_, local_selections_, group_tokens_;
  std::vector<int32_t> group_node_;
};

}  // namespace moesim::sim
