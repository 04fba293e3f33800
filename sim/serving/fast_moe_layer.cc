#include "sim/serving/fast_moe_layer.h"

#include <cmath>
#include <vector>

#include "sim/core/time.h"

namespace moesim::sim {

FastMoeLayer::FastMoeLayer(const MoeLayerDeps& deps)
    : deps_(deps),
      exact_(deps),
      fast_(deps.topology, std::vector<GpuId>(deps.gpus.begin(), deps.gpus.end()),
            deps.deployment.dispatch) {
  dst_selections_.assign(deps_.gpus.size(), 0);
}

CollectiveTimes FastMoeLayer::run(const MoeLayerCall& call, StepState& state) {
  if (deps_.deployment.node_limited_traffic) {
    fill_layer_node_limit(deps_, call, node_limit_scratch_, node_limit_);
    fast_.set_node_limit(node_limit_);
  }
  CollectiveTimes t;
  last_fast_ = run_fast(call, state, t);
  if (!last_fast_) {
    t = exact_.run(call, state);
    state.result.num_exact_layers++;
    return t;
  }
  // run_fast() priced the experts.
  if (deps_.options.report_expert_loads && !call.in_draft) {
    deps_.reporter.record_expert_loads(call.step_idx, call.moe_idx, state.step_tokens,
                                       state.result);
  }
  const std::span<const int64_t> slot_loads = dispatcher_.slot_loads();
  deps_.reporter.record_slot_balance(call.step_idx, call.moe_idx,
                                     last_replicas_ ? &slot_loads : nullptr, state.result);
  state.result.num_fast_layers++;
  return t;
}

bool FastMoeLayer::run_fast(const MoeLayerCall& call, StepState& state, CollectiveTimes& t) {
  const ExpertPlacement& placement = deps_.placements.layer(call.moe_idx);
  if (!fast_.valid()) return false;
  if (deps_.options.background && any_remaining(*deps_.options.background)) return false;
  RoutingQuery q;
  q.step_idx = call.step_idx;
  q.moe_layer_idx = call.moe_idx;
  q.tokens_per_src = state.src_tokens;
  const auto n = static_cast<int32_t>(deps_.gpus.size());
  last_replicas_ = placement.has_replicas();
  if (last_replicas_) {
    if (!route_replicated(q, placement, state)) return false;
  } else {
    q.candidate_epsilon = kCandidateEpsilon;
    q.placement_version = deps_.placements.version(call.moe_idx);
    if (!deps_.routing.route_totals_to_gpus(q, placement.primary_gpu_of_expert(), n,
                                            dst_selections_)) {
      return false;
    }
  }
  deps_.pricer.refresh_slots(deps_.placements, call.moe_idx);
  fill_fast_tokens(state);
  const int64_t tokens = fast_token_sum_;
  fast_reach_.resize(n);
  const MoeSpec& m = *call.moe;
  const FastReach reach{m.top_k, deps_.deployment.dispatch == DispatchAlgorithm::kLowLatency};
  ExpertPricer::Extras extras{.split_parts = call.microbatched, .balance = &state.result};
  if (last_replicas_) {
    deps_.pricer.price(m, dst_selections_, state.gpu_tokens, extras);
    // Replicas serve their own node's sources first: reach from the node and from the rest.
    fast_remote_reach_.resize(n);
    for (int32_t g = 0; g < n; ++g) {
      const auto node_tokens = static_cast<double>(node_tokens_[placement.node_of(g)]);
      const auto local = static_cast<double>(local_selections_[g]);
      fast_reach_[g] = reach.of(local, node_tokens);
      fast_remote_reach_[g] = reach.of(static_cast<double>(dst_selections_[g]) - local,
                                       static_cast<double>(tokens) - node_tokens);
    }
    fast_.load(fast_tokens_, fast_reach_, fast_remote_reach_);
  } else {
    // Each destination's reach from the layer's tokens, in the pricing's pass over the GPUs.
    extras.reach = &reach;
    extras.reach_tokens = static_cast<double>(tokens);
    extras.reach_out = &fast_reach_;
    deps_.pricer.price(m, dst_selections_, state.gpu_tokens, extras);
    fast_.load(fast_tokens_, fast_reach_);
  }
  t = seconds();
  if (deps_.options.track_nic_bytes) {
    fast_.add_nic_bytes(deps_.dispatch_row_bytes, false, state.result.nic_in_bytes,
                        state.result.nic_out_bytes);
    fast_.add_nic_bytes(deps_.combine_row_bytes, true, state.result.nic_in_bytes,
                        state.result.nic_out_bytes);
  }
  return true;
}

bool FastMoeLayer::route_replicated(const RoutingQuery& q, const ExpertPlacement& placement,
                                    const StepState& state) {
  // Per-expert totals, then the token-to-replica rule on them (ReplicaDispatcher).
  if (deps_.routing.reports_destinations() ||
      !deps_.routing.route_expert_totals(q, expert_totals_)) {
    return false;
  }
  // Source groups: one per node from 8 nodes on, else one per source (the greedy rule's order
  // matters most with few sources).
  const auto n = static_cast<int32_t>(deps_.gpus.size());
  const int32_t num_nodes = placement.node_of(n - 1) + 1;
  node_tokens_.assign(num_nodes, 0);
  for (int32_t g = 0; g < n; ++g) node_tokens_[placement.node_of(g)] += state.gpu_tokens[g];
  group_tokens_.clear();
  group_node_.clear();
  for (int32_t g = 0; g < n; ++g) {
    if (num_nodes >= 8) {
      if (g > 0 && placement.node_of(g) == placement.node_of(g - 1)) continue;
      group_tokens_.push_back(node_tokens_[placement.node_of(g)]);
    } else {
      group_tokens_.push_back(state.gpu_tokens[g]);
    }
    group_node_.push_back(placement.node_of(g));
  }
  dispatcher_.dispatch_totals(placement, expert_totals_, group_tokens_, group_node_,
                              dst_selections_, local_selections_);
  return true;
}

void FastMoeLayer::fill_fast_tokens(const StepState& state) {
  if (fast_tokens_version_ == state.tokens_version) return;
  const auto n = static_cast<int32_t>(deps_.gpus.size());
  fast_tokens_.resize(n);
  int64_t sum = 0;
  for (int32_t g = 0; g < n; ++g) {
    sum += state.gpu_tokens[g];
    fast_tokens_[g] = static_cast<double>(state.gpu_tokens[g]);
  }
  fast_token_sum_ = sum;
  fast_tokens_version_ = state.tokens_version;
}

CollectiveTimes FastMoeLayer::seconds() const {
  const FastAllToAll::Seconds s =
      fast_.both_seconds(deps_.dispatch_row_bytes, deps_.combine_row_bytes);
  CollectiveTimes t;
  t.dispatch_s = to_seconds(collective_duration_ns(s.dispatch, deps_.topology, {}));
  t.combine_s = to_seconds(collective_duration_ns(s.combine, deps_.topology, {}));
  t.dispatch_bytes = fast_.total_tokens() * deps_.dispatch_row_bytes;
  t.combine_bytes = fast_.total_tokens() * deps_.combine_row_bytes;
  return t;
}

void FastMoeLayer::begin_microbatches() {
  if (!last_fast_) return exact_.begin_microbatches();
  whole_dst_selections_.assign(dst_selections_.begin(), dst_selections_.end());
}

void FastMoeLayer::split_microbatch(int32_t mb, std::span<const int64_t> whole_tokens,
                                    std::span<const int64_t> mb0_tokens, int64_t whole_sum,
                                    int64_t mb0_sum) {
  if (!last_fast_) {
    return exact_.split_microbatch(mb, whole_tokens, mb0_tokens, whole_sum, mb0_sum);
  }
  // The destinations' totals split by the micro-batches' token shares.
  for (size_t d = 0; d < dst_selections_.size(); ++d) {
    const auto sel = static_cast<double>(whole_dst_selections_[d]);
    const int64_t sel0 =
        whole_sum > 0
            ? std::llround(sel * static_cast<double>(mb0_sum) / static_cast<double>(whole_sum))
            : 0;
    dst_selections_[d] = mb == 0 ? sel0 : whole_dst_selections_[d] - sel0;
  }
}

CollectiveTimes FastMoeLayer::time_microbatch(int32_t mb, const MoeSpec& m, StepState& state) {
  if (!last_fast_) return exact_.time_microbatch(mb, m, state);
  // The whole layer's reach, on the micro-batch's tokens.
  fill_fast_tokens(state);
  if (last_replicas_) {
    fast_.load(fast_tokens_, fast_reach_, fast_remote_reach_);
  } else {
    fast_.load(fast_tokens_, fast_reach_);
  }
  return seconds();
}

void FastMoeLayer::end_microbatches(const MoeLayerCall& call, const CollectiveTimes& total,
                                    StepState& state) {
  if (!last_fast_) return exact_.end_microbatches(call, total, state);
  std::copy(whole_dst_selections_.begin(), whole_dst_selections_.end(), dst_selections_.begin());
}

}  // namespace moesim::sim
