// StepModel's MoE layer: router, routing, unique tokens per (source, destination), the traffic
// plan and its collectives (background transfers riding along), expert pricing and the expert
// loads reported to policies. The timeline of the layer is in step_model.cc.
#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "sim/cost/op_formulas.h"
#include "sim/serving/step_model.h"

namespace moesim::sim {
namespace {

// x^k for a small integer k >= 0 by squaring (the hot path avoids std::pow).
double ipow(double x, int64_t k) {
  if (k == 8) {
    // The loop's products for k = 8 (the usual top-k) without its branches: r = 1 x x^8 = x^8.
    const double x2 = x * x, x4 = x2 * x2;
    return x4 * x4;
  }
  double r = 1.0;
  while (k > 0) {
    if (k & 1) r *= x;
    x *= x;
    k >>= 1;
  }
  return r;
}

// std::llround for 0 <= x < 2^52 without the libm call: half away from zero is truncation plus
// one when the fraction is >= 0.5 (the subtraction is exact in that range).
int64_t round_non_negative(double x) {
  const auto whole = static_cast<int64_t>(x);
  return whole + static_cast<int64_t>(x - static_cast<double>(whole) >= 0.5);
}

}  // namespace

inline double StepModel::FastReach::of(double sel, double src_tokens) const {
  // Product-form token counts (fast_all_to_all.h): reach_d = 1 - (1 - q_d)^k with q_d the
  // destination's share of the layer's selections; low-latency dispatch sends every selection,
  // so its rows per source token are k q_d (the exact tier's counts are the selections).
  const double selections = src_tokens * static_cast<double>(top_k);
  const double share = selections > 0 ? sel / selections : 0;
  if (per_selection) return share * static_cast<double>(top_k);
  return 1.0 - ipow(1.0 - std::min(share, 1.0), top_k);
}

void StepModel::run_moe_layer(int64_t step_idx, int32_t layer_idx, StepObserver* observer) {
  run_moe_layer(step_idx, layer_idx, layer_idx, observer);
}

void StepModel::run_moe_layer(int64_t step_idx, int32_t layer_idx, int32_t source_layer_idx,
                              StepObserver* observer, bool router_run) {
  const int32_t moe_idx = layers_[source_layer_idx].moe_idx;
  const MoeSpec& m = card_.layers[source_layer_idx].ffn.moe;
  // Under a micro-batch timeline the layer is priced per micro-batch and timed later
  // (step_model_microbatch.cc); draft passes keep the barriers.
  const bool microbatched = schedule_ && !in_draft_;
  if (!microbatched && !router_run) run_router(layer_idx, m, observer);
  if (deployment_.node_limited_traffic) {
    // Node-limited routing (node_limited_routing.h) over this layer's placement.
    fill_node_limit(topology_, gpus_, placements_->layer(moe_idx).primary_gpu_of_expert(),
                    static_cast<int32_t>(m.num_expert_groups), static_cast<int32_t>(m.topk_groups),
                    static_cast<int32_t>(m.top_k), node_limit_scratch_, token_counts_.node_limit);
    if (fast_) fast_->set_node_limit(token_counts_.node_limit);
  }
  double dispatch_s = 0, combine_s = 0, dispatch_bytes = 0, combine_bytes = 0;
  if (fast_tier_ && run_fast_collectives(step_idx, moe_idx, m, dispatch_s, combine_s,
                                         dispatch_bytes, combine_bytes)) {
    // run_fast_collectives() priced the experts (price_experts(m)).
    if (report_loads_ && !in_draft_) record_expert_loads(step_idx, moe_idx);
    record_slot_balance(step_idx, moe_idx);
    if (microbatched) price_microbatch_layer(layer_idx, m, true, dispatch_bytes, combine_bytes);
    result_.num_fast_layers++;
  } else if (microbatched) {
    route(step_idx, moe_idx);
    if (report_loads_) record_expert_loads(step_idx, moe_idx);
    record_slot_balance(step_idx, moe_idx);
    count_unique_tokens(m.top_k);
    price_experts(m);
    price_microbatch_layer(layer_idx, m, false, dispatch_bytes, combine_bytes);
    if (observer) observer->on_routing(layer_idx, moe_idx, src_dst_, dispatch_bytes, combine_bytes);
    result_.num_exact_layers += fast_tier_ ? 1 : 0;
  } else {
    route(step_idx, moe_idx);
    if (report_loads_ && !in_draft_) record_expert_loads(step_idx, moe_idx);
    record_slot_balance(step_idx, moe_idx);
    count_unique_tokens(m.top_k);
    // Dispatch: barrier, then the collective. One pass over the counts for both collectives (the
    // unique (token, node) estimates of hierarchical traffic included).
    plan_.build(topology_, token_counts_, deployment_.dispatch);
    plan_.dispatch_traffic(dispatch_row_bytes_, traffic_);
    if (background_) add_background_traffic();
    network_->run(traffic_, collective_);
    if (track_nic_bytes_) add_exact_nic_bytes();
    dispatch_s = to_seconds(collective_.duration_ns);
    dispatch_bytes = traffic_.total_bytes();
    price_experts(m);
    plan_.combine_traffic(combine_row_bytes_, traffic_);
    combine_bytes = traffic_.total_bytes();
    network_->run(traffic_, collective_);
    if (track_nic_bytes_) add_exact_nic_bytes();
    combine_s = to_seconds(collective_.duration_ns);
    if (observer && !in_draft_) {
      observer->on_routing(layer_idx, moe_idx, src_dst_, dispatch_bytes, combine_bytes);
    }
    result_.num_exact_layers += fast_tier_ ? 1 : 0;
  }
  dispatch_s = dispatch_kernel_.seconds(dispatch_s);
  combine_s = combine_kernel_.seconds(combine_s);
  result_.dispatch_bytes += dispatch_bytes;
  result_.combine_bytes += combine_bytes;
  if (microbatched) return;

  if (deployment_.overlap == OverlapMode::kSimple) {
    advance_overlapped(layer_idx, dispatch_s, combine_s, observer);
  } else {
    const double ready =
        router_run ? ready_s_ : *std::max_element(clock_s_.begin(), clock_s_.end());
    advance_with_barriers(layer_idx, dispatch_s, combine_s, ready, observer);
  }
}

void StepModel::run_router(int32_t layer_idx, const MoeSpec& m, StepObserver* observer) {
  // Router and permutation on every GPU.
  const int64_t hidden = card_.hidden_size;
  if (memo_allowed_) use_token_ops_spec(m);
  for (int32_t g = 0; g < num_gpus(); ++g) {
    const int64_t t = gpu_tokens_[g];
    if (t == 0) continue;
    double r = 0;
    if (memo_allowed_) {
      r = token_ops(g, m).router_permute;
    } else {
      r = cost_.checked_seconds(router_work(m, hidden, t, card_.precision.shared_experts)) +
          cost_.checked_seconds(permute_work(t, m.top_k, hidden));
    }
    advance_compute(g, "router", layer_idx, r, observer);
  }
}

void StepModel::record_expert_loads(int64_t step_idx, int32_t moe_layer_idx) {
  const std::span<const double> pi = routing_->expected_shares(moe_layer_idx, step_idx);
  const auto num_experts = static_cast<size_t>(placements_->num_experts());
  if (pi.size() != num_experts) {
    result_.expert_loads.clear();
    return;
  }
  if (moe_layer_idx == 0) result_.expert_loads.assign(num_experts * num_moe_layers(card_), 0.0);
  if (result_.expert_loads.empty()) return;
  double* row = &result_.expert_loads[static_cast<size_t>(moe_layer_idx) * num_experts];
  for (size_t e = 0; e < num_experts; ++e) row[e] = pi[e] * static_cast<double>(step_tokens_);
}

void StepModel::route(int64_t step_idx, int32_t moe_layer_idx) {
  // Routing: selections per (source GPU, destination GPU).
  const int32_t n = num_gpus();
  RoutingQuery q;
  q.step_idx = step_idx;
  q.moe_layer_idx = moe_layer_idx;
  q.tokens_per_src = src_tokens_;
  const ExpertPlacement& placement = placements_->layer(moe_layer_idx);
  if (placement.has_replicas() && !routing_->reports_destinations()) {
    routing_->route(q, src_expert_);
    dispatcher_.dispatch(placement, src_expert_, src_dst_);
  } else {
    routing_->route_to_gpus(q, placement.primary_gpu_of_expert(), n, src_dst_);
  }
  refresh_slots(moe_layer_idx);
}

void StepModel::refresh_slots(int32_t moe_layer_idx) {
  const uint64_t version = placements_->version(moe_layer_idx);
  if (version == slots_version_) return;
  slots_version_ = version;
  const ExpertPlacement& placement = placements_->layer(moe_layer_idx);
  for (int32_t g = 0; g < num_gpus(); ++g) {
    const int32_t slots = placement.num_slots(g);
    if (slots == experts_per_gpu_[g]) continue;
    experts_per_gpu_[g] = slots;
    log1p_inv_experts_[g] = std::log1p(-1.0 / static_cast<double>(slots));
  }
}

void StepModel::set_fast_tier(bool on) {
  fast_tier_ = on;
  if (on && moe_ && !fast_) {
    fast_ = std::make_unique<FastAllToAll>(topology_, gpus_, deployment_.dispatch);
    fast_->set_nic_slowdown(nic_in_slowdown_, nic_out_slowdown_);
  }
}

std::string StepModel::fast_tier_refusal() const {
  if (!moe_) return "";
  if (fast_) return fast_->why_not();
  return FastAllToAll(topology_, gpus_, deployment_.dispatch).why_not();
}

bool StepModel::run_fast_collectives(int64_t step_idx, int32_t moe_layer_idx, const MoeSpec& m,
                                     double& dispatch_s, double& combine_s, double& dispatch_bytes,
                                     double& combine_bytes) {
  const ExpertPlacement& placement = placements_->layer(moe_layer_idx);
  if (!fast_ || !fast_->valid()) return false;
  if (background_) {
    for (const BackgroundTransfer& t : *background_) {
      if (t.remaining_total() > 0) return false;
    }
  }
  RoutingQuery q;
  q.step_idx = step_idx;
  q.moe_layer_idx = moe_layer_idx;
  q.tokens_per_src = src_tokens_;
  const int32_t n = num_gpus();
  if (placement.has_replicas()) {
    // Per-expert totals, then the token-to-replica rule on them (ReplicaDispatcher).
    if (routing_->reports_destinations() || !routing_->route_expert_totals(q, expert_totals_)) {
      return false;
    }
    // Source groups: one per node from 8 nodes on, else one per source (the greedy rule's
    // order matters most with few sources).
    const int32_t num_nodes = placement.node_of(n - 1) + 1;
    node_tokens_.assign(num_nodes, 0);
    for (int32_t g = 0; g < n; ++g) node_tokens_[placement.node_of(g)] += gpu_tokens_[g];
    group_tokens_.clear();
    group_node_.clear();
    for (int32_t g = 0; g < n; ++g) {
      if (num_nodes >= 8) {
        if (g > 0 && placement.node_of(g) == placement.node_of(g - 1)) continue;
        group_tokens_.push_back(node_tokens_[placement.node_of(g)]);
      } else {
        group_tokens_.push_back(gpu_tokens_[g]);
      }
      group_node_.push_back(placement.node_of(g));
    }
    dispatcher_.dispatch_totals(placement, expert_totals_, group_tokens_, group_node_,
                                dst_selections_, local_selections_);
  } else {
    q.candidate_epsilon = kFastCandidateEpsilon;
    q.placement_version = placements_->version(moe_layer_idx);
    if (!routing_->route_totals_to_gpus(q, placement.primary_gpu_of_expert(), n, dst_selections_)) {
      return false;
    }
  }
  refresh_slots(moe_layer_idx);
  fill_fast_tokens();
  const int64_t tokens = fast_token_sum_;
  fast_reach_.resize(n);
  const FastReach reach{m.top_k, deployment_.dispatch == DispatchAlgorithm::kLowLatency};
  if (placement.has_replicas()) {
    price_experts(m);
    // Replicas serve their own node's sources first: reach from the node and from the rest.
    fast_remote_reach_.resize(n);
    for (int32_t g = 0; g < n; ++g) {
      const auto node_tokens = static_cast<double>(node_tokens_[placement.node_of(g)]);
      const auto local = static_cast<double>(local_selections_[g]);
      fast_reach_[g] = reach.of(local, node_tokens);
      fast_remote_reach_[g] = reach.of(static_cast<double>(dst_selections_[g]) - local,
                                       static_cast<double>(tokens) - node_tokens);
    }
    fast_->load(fast_tokens_, fast_reach_, fast_remote_reach_);
  } else {
    // Each destination's reach from the layer's tokens, in the pricing's pass over the GPUs.
    price_experts(m, /*record_balance=*/true, &reach, static_cast<double>(tokens));
    fast_->load(fast_tokens_, fast_reach_);
  }
  const FastAllToAll::Seconds s = fast_->both_seconds(dispatch_row_bytes_, combine_row_bytes_);
  dispatch_s = to_seconds(collective_duration_ns(s.dispatch, topology_, {}));
  combine_s = to_seconds(collective_duration_ns(s.combine, topology_, {}));
  dispatch_bytes = fast_->total_tokens() * dispatch_row_bytes_;
  combine_bytes = fast_->total_tokens() * combine_row_bytes_;
  if (track_nic_bytes_) {
    fast_->add_nic_bytes(dispatch_row_bytes_, false, result_.nic_in_bytes, result_.nic_out_bytes);
    fast_->add_nic_bytes(combine_row_bytes_, true, result_.nic_in_bytes, result_.nic_out_bytes);
  }
  return true;
}

void StepModel::fill_fast_tokens() {
  if (fast_tokens_version_ == tokens_version_) return;
  const int32_t n = num_gpus();
  fast_tokens_.resize(n);
  int64_t sum = 0;
  for (int32_t g = 0; g < n; ++g) {
    sum += gpu_tokens_[g];
    fast_tokens_[g] = static_cast<double>(gpu_tokens_[g]);
  }
  fast_token_sum_ = sum;
  fast_tokens_version_ = tokens_version_;
}

void StepModel::find_nic_links() {
  if (!nic_in_link_.empty()) return;
  nic_in_link_.assign(gpus_.size(), -1);
  nic_out_link_.assign(gpus_.size(), -1);
  std::vector<int32_t> idx(static_cast<size_t>(topology_.num_gpus()), -1);
  for (size_t g = 0; g < gpus_.size(); ++g)
    idx[static_cast<size_t>(gpus_[g].value)] = static_cast<int32_t>(g);
  const std::vector<Link>& links = topology_.links();
  for (size_t l = 0; l < links.size(); ++l) {
    if (links[l].link_class != LinkClass::kNic) continue;
    if (links[l].from_vertex < topology_.num_gpus() && idx[links[l].from_vertex] >= 0) {
      nic_out_link_[idx[links[l].from_vertex]] = static_cast<int32_t>(l);
    }
    if (links[l].to_vertex < topology_.num_gpus() && idx[links[l].to_vertex] >= 0) {
      nic_in_link_[idx[links[l].to_vertex]] = static_cast<int32_t>(l);
    }
  }
}

void StepModel::set_nic_slowdown(std::span<const double> in, std::span<const double> out) {
  MOESIM_CHECK((in.empty() || static_cast<int32_t>(in.size()) == num_gpus()) &&
                   (out.empty() || static_cast<int32_t>(out.size()) == num_gpus()),
               "a NIC slowdown per replica GPU");
  nic_in_slowdown_.assign(in.begin(), in.end());
  nic_out_slowdown_.assign(out.begin(), out.end());
  if (fast_) fast_->set_nic_slowdown(in, out);
  if (!network_) return;
  if (in.empty() && out.empty()) {
    link_slowdown_.clear();
  } else {
    find_nic_links();
    link_slowdown_.assign(topology_.links().size(), 1.0);
    for (int32_t g = 0; g < num_gpus(); ++g) {
      if (!in.empty() && nic_in_link_[g] >= 0) link_slowdown_[nic_in_link_[g]] = in[g];
      if (!out.empty() && nic_out_link_[g] >= 0) link_slowdown_[nic_out_link_[g]] = out[g];
    }
  }
  MOESIM_CHECK(network_->set_link_slowdown(link_slowdown_),
               "the network model does not support host-link contention");
}

void StepModel::set_track_nic_bytes(bool on) {
  track_nic_bytes_ = on;
  if (on) find_nic_links();
}

void StepModel::add_exact_nic_bytes() {
  const std::span<const double> bytes = network_->link_bytes();
  MOESIM_CHECK(!bytes.empty(), "the network model does not report link bytes");
  for (int32_t g = 0; g < num_gpus(); ++g) {
    if (nic_in_link_[g] >= 0) result_.nic_in_bytes[g] += bytes[nic_in_link_[g]];
    if (nic_out_link_[g] >= 0) result_.nic_out_bytes[g] += bytes[nic_out_link_[g]];
  }
}

void StepModel::count_unique_tokens(int64_t k) {
  // T_s (1 - (1 - q)^k) tokens of source s reach destination d, q = sel / (T_s k), clamped to
  // [ceil(sel / experts of d), min(sel, T_s)]. Low-latency dispatch sends every selection: the
  // counts are the selections.
  const int32_t n = num_gpus();
  std::fill(dst_selections_.begin(), dst_selections_.end(), 0);
  if (deployment_.dispatch == DispatchAlgorithm::kLowLatency) {
    for (int32_t s = 0; s < n; ++s) {
      int64_t* tokens = &token_counts_.tokens[static_cast<size_t>(s) * n];
      auto row = src_dst_.row(s);
      for (int32_t d = 0; d < n; ++d) {
        dst_selections_[d] += row[d];
        tokens[d] = row[d];
      }
    }
    return;
  }
  for (int32_t s = 0; s < n; ++s) {
    int64_t* tokens = &token_counts_.tokens[static_cast<size_t>(s) * n];
    const double ts = static_cast<double>(gpu_tokens_[s]);
    if (ts == 0) {
      std::fill_n(tokens, n, 0);
      continue;
    }
    auto row = src_dst_.row(s);
    for (int32_t d = 0; d < n; ++d) {
      int32_t sel = row[d];
      dst_selections_[d] += sel;
      if (sel == 0) {
        tokens[d] = 0;
        continue;
      }
      double qsd = static_cast<double>(sel) / (ts * static_cast<double>(k));
      double uniq = ts * (1.0 - ipow(1.0 - std::min(qsd, 1.0), k));
      int64_t u = round_non_negative(uniq);
      u = std::clamp<int64_t>(u, (sel + experts_per_gpu_[d] - 1) / std::max(1, experts_per_gpu_[d]),
                              std::min<int64_t>(sel, gpu_tokens_[s]));
      tokens[d] = u;
    }
  }
}

void StepModel::add_background_traffic() {
  // Background transfers ride along with the dispatch, chunk by chunk.
  const int32_t n = num_gpus();
  for (BackgroundTransfer& t : *background_) {
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t d = 0; d < n; ++d) {
        double& rem = t.remaining_bytes[static_cast<size_t>(s) * n + d];
        if (rem <= 0) continue;
        double x = std::min(rem, background_chunk_bytes_);
        traffic_.add_bytes(s, d, x);
        rem -= x;
      }
    }
  }
}

void StepModel::price_experts(const MoeSpec& m, bool record_balance, const FastReach* reach,
                              double reach_tokens) {
  // Routed and shared experts and the combine on every GPU. Routed experts take the first MoE
  // layer's shape (moe_), the one the placement holds.
  const int32_t n = num_gpus();
  const int64_t hidden = card_.hidden_size;
  const bool has_shared = m.num_shared_experts > 0;
  if (memo_allowed_) use_token_ops_spec(m);
  double max_sel = 0, sum_sel = 0, max_ffn = 0;
  // The routed and shared parts apart: for micro-batch timelines only.
  const bool split_parts = schedule_ != nullptr;
  for (int32_t g = 0; g < n; ++g) {
    const double sel = static_cast<double>(dst_selections_[g]);
    if (reach) fast_reach_[g] = reach->of(sel, reach_tokens);
    max_sel = std::max(max_sel, sel);
    sum_sel += sel;
    const double e =
        sel > 0 ? expert_seconds(dst_selections_[g], experts_per_gpu_[g], log1p_inv_experts_[g])
                : 0.0;
    const int64_t t = gpu_tokens_[g];
    double sh = 0, cmb = 0;
    if (t > 0 && memo_allowed_) {
      const TokenOpsMemo& ops = token_ops(g, m);
      sh = ops.shared;
      cmb = ops.combine;
    } else if (t > 0) {
      if (has_shared) {
        sh =
            cost_.checked_seconds(shared_expert_work(m, hidden, t, card_.precision.shared_experts));
      }
      cmb = cost_.checked_seconds(combine_work(t, m.top_k, has_shared, hidden));
    }
    ffn_s_[g] = e + sh + cmb;
    max_ffn = std::max(max_ffn, ffn_s_[g]);
    if (split_parts) {
      routed_s_[g] = e + cmb;
      shared_s_[g] = sh;
    }
  }
  max_ffn_s_ = max_ffn;
  if (!record_balance) return;
  result_.max_gpu_selections += max_sel;
  result_.mean_gpu_selections += sum_sel / n;
  if (max_sel > 0) {
    const double mean_sel = sum_sel / n;
    result_.gpu_imbalance_sum += (max_sel - mean_sel) / mean_sel;
    result_.gpu_balancedness_sum += mean_sel / max_sel;
    result_.num_gpu_balance_layers++;
  }
}

void StepModel::record_slot_balance(int64_t step_idx, int32_t moe_layer_idx) {
  const ExpertPlacement& placement = placements_->layer(moe_layer_idx);
  double max_load = 0, sum_load = 0;
  if (placement.has_replicas() && !routing_->reports_destinations()) {
    // route() dispatched per expert: the selections each slot received.
    for (const int64_t c : dispatcher_.slot_loads()) {
      const auto load = static_cast<double>(c);
      max_load = std::max(max_load, load);
      sum_load += load;
    }
  } else {
    // Fast path: no per-expert counts were drawn; the expected ones (a scale of the shares:
    // the ratios do not depend on the step's tokens). The figures are kept per layer while the
    // placement and the shares keep their versions.
    SlotBalance& cached = slot_balance_[moe_layer_idx];
    const uint64_t placement_version = placements_->version(moe_layer_idx);
    const uint64_t shares_version = routing_->expected_shares_version(moe_layer_idx, step_idx);
    if (shares_version == 0 || cached.placement_version != placement_version ||
        cached.shares_version != shares_version) {
      cached = SlotBalance{};
      const std::span<const double> pi = routing_->expected_shares(moe_layer_idx, step_idx);
      if (static_cast<int32_t>(pi.size()) != placement.num_experts()) return;
      for (int32_t e = 0; e < placement.num_experts(); ++e) {
        const double load = pi[e] / static_cast<double>(placement.replicas(e).size());
        max_load = std::max(max_load, load);
        sum_load += load * static_cast<double>(placement.replicas(e).size());
      }
      if (max_load > 0) {
        const double mean_load = sum_load / static_cast<double>(placement.total_slots());
        cached.counted = true;
        cached.imbalance = (max_load - mean_load) / mean_load;
        cached.balancedness = mean_load / max_load;
      }
      cached.placement_version = placement_version;
      cached.shares_version = shares_version;
    }
    if (!cached.counted) return;
    result_.slot_imbalance_sum += cached.imbalance;
    result_.slot_balancedness_sum += cached.balancedness;
    result_.num_slot_balance_layers++;
    return;
  }
  if (max_load <= 0) return;
  const double mean_load = sum_load / static_cast<double>(placement.total_slots());
  result_.slot_imbalance_sum += (max_load - mean_load) / mean_load;
  result_.slot_balancedness_sum += mean_load / max_load;
  result_.num_slot_balance_layers++;
}

}  // namespace moesim::sim
