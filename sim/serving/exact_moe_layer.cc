#include "sim/serving/exact_moe_layer.h"

#include <algorithm>

#include "sim/core/time.h"

namespace moesim::sim {
namespace {

// std::llround for 0 <= x < 2^52 without the libm call: half away from zero is truncation plus
// one when the fraction is >= 0.5 (the subtraction is exact in that range).
int64_t round_non_negative(double x) {
  const auto whole = static_cast<int64_t>(x);
  return whole + static_cast<int64_t>(x - static_cast<double>(whole) >= 0.5);
}

}  // namespace

ExactMoeLayer::ExactMoeLayer(const MoeLayerDeps& deps) : deps_(deps) {
  const auto n = deps_.gpus.size();
  token_counts_.gpus.assign(deps_.gpus.begin(), deps_.gpus.end());
  token_counts_.tokens.resize(n * n);
  dst_selections_.assign(n, 0);
}

CollectiveTimes ExactMoeLayer::run(const MoeLayerCall& call, StepState& state) {
  const MoeSpec& m = *call.moe;
  if (deps_.deployment.node_limited_traffic) {
    fill_layer_node_limit(deps_, call, node_limit_scratch_, token_counts_.node_limit);
  }
  route(call, state);
  if (deps_.options.report_expert_loads && !call.in_draft) {
    deps_.reporter.record_expert_loads(call.step_idx, call.moe_idx, state.step_tokens,
                                       state.result);
  }
  const std::span<const int64_t> slot_loads = dispatcher_.slot_loads();
  deps_.reporter.record_slot_balance(call.step_idx, call.moe_idx,
                                     dispatched_per_expert_ ? &slot_loads : nullptr, state.result);
  count_unique_tokens(m.top_k, state);
  const ExpertPricer::Extras extras{.split_parts = call.microbatched, .balance = &state.result};
  if (call.microbatched) {
    deps_.pricer.price(m, dst_selections_, state.gpu_tokens, extras);
    return {};
  }
  // Dispatch: barrier, then the collective; the experts; the combine. One pass over the counts
  // for both collectives (the unique (token, node) estimates of hierarchical traffic included).
  CollectiveTimes t;
  run_dispatch(/*with_background=*/true, state, t);
  deps_.pricer.price(m, dst_selections_, state.gpu_tokens, extras);
  run_combine(state, t);
  if (call.observer && !call.in_draft) {
    call.observer->on_routing(call.layer_idx, call.moe_idx, src_dst_, t.dispatch_bytes,
                              t.combine_bytes);
  }
  return t;
}

void ExactMoeLayer::run_dispatch(bool with_background, StepState& state, CollectiveTimes& t) {
  if (counts_tokens_version_ != state.tokens_version) {
    token_counts_.tokens_per_src.assign(state.gpu_tokens.begin(), state.gpu_tokens.end());
    counts_tokens_version_ = state.tokens_version;
  }
  plan_.build(deps_.topology, token_counts_, deps_.deployment.dispatch);
  plan_.dispatch_traffic(deps_.dispatch_row_bytes, traffic_);
  if (with_background && deps_.options.background) add_background_traffic();
  deps_.network.run(traffic_, collective_);
  if (deps_.nic) {
    deps_.nic->add_link_bytes(deps_.network, state.result.nic_in_bytes, state.result.nic_out_bytes);
  }
  t.dispatch_s = to_seconds(collective_.duration_ns);
  t.dispatch_bytes = traffic_.total_bytes();
}

void ExactMoeLayer::run_combine(StepState& state, CollectiveTimes& t) {
  plan_.combine_traffic(deps_.combine_row_bytes, traffic_);
  t.combine_bytes = traffic_.total_bytes();
  deps_.network.run(traffic_, collective_);
  if (deps_.nic) {
    deps_.nic->add_link_bytes(deps_.network, state.result.nic_in_bytes, state.result.nic_out_bytes);
  }
  t.combine_s = to_seconds(collective_.duration_ns);
}

void ExactMoeLayer::route(const MoeLayerCall& call, const StepState& state) {
  // Routing: selections per (source GPU, destination GPU).
  const auto n = static_cast<int32_t>(deps_.gpus.size());
  RoutingQuery q;
  q.step_idx = call.step_idx;
  q.moe_layer_idx = call.moe_idx;
  q.tokens_per_src = state.src_tokens;
  const ExpertPlacement& placement = deps_.placements.layer(call.moe_idx);
  dispatched_per_expert_ = placement.has_replicas() && !deps_.routing.reports_destinations();
  if (dispatched_per_expert_) {
    deps_.routing.route(q, src_expert_);
    dispatcher_.dispatch(placement, src_expert_, src_dst_);
  } else {
    deps_.routing.route_to_gpus(q, placement.primary_gpu_of_expert(), n, src_dst_);
  }
  deps_.pricer.refresh_slots(deps_.placements, call.moe_idx);
}

void ExactMoeLayer::count_unique_tokens(int64_t k, const StepState& state) {
  // T_s (1 - (1 - q)^k) tokens of source s reach destination d, q = sel / (T_s k), clamped to
  // [ceil(sel / experts of d), min(sel, T_s)]. Low-latency dispatch sends every selection: the
  // counts are the selections.
  const auto n = static_cast<int32_t>(deps_.gpus.size());
  std::fill(dst_selections_.begin(), dst_selections_.end(), 0);
  if (deps_.deployment.dispatch == DispatchAlgorithm::kLowLatency) {
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
  const std::span<const int32_t> slots = deps_.pricer.slots_per_gpu();
  for (int32_t s = 0; s < n; ++s) {
    int64_t* tokens = &token_counts_.tokens[static_cast<size_t>(s) * n];
    const double ts = static_cast<double>(state.gpu_tokens[s]);
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
      u = std::clamp<int64_t>(u, (sel + slots[d] - 1) / std::max(1, slots[d]),
                              std::min<int64_t>(sel, state.gpu_tokens[s]));
      tokens[d] = u;
    }
  }
}

void ExactMoeLayer::add_background_traffic() {
  // Background transfers ride along with the dispatch, chunk by chunk.
  const auto n = static_cast<int32_t>(deps_.gpus.size());
  for (BackgroundTransfer& t : *deps_.options.background) {
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t d = 0; d < n; ++d) {
        double& rem = t.remaining_bytes[static_cast<size_t>(s) * n + d];
        if (rem <= 0) continue;
        double x = std::min(rem, deps_.options.background_chunk_bytes);
        traffic_.add_bytes(s, d, x);
        rem -= x;
      }
    }
  }
}

void ExactMoeLayer::begin_microbatches() {
  whole_dst_selections_.assign(dst_selections_.begin(), dst_selections_.end());
}

void ExactMoeLayer::split_microbatch(int32_t mb, std::span<const int64_t> whole_tokens,
                                     std::span<const int64_t> mb0_tokens, int64_t, int64_t) {
  // Each source's selections to each destination in proportion to the micro-batch's tokens.
  const auto n = static_cast<int32_t>(deps_.gpus.size());
  mb_src_dst_.reset(n, n);
  for (int32_t s = 0; s < n; ++s) {
    const auto ts = static_cast<double>(whole_tokens[s]);
    const auto t0 = static_cast<double>(mb0_tokens[s]);
    for (int32_t d = 0; d < n; ++d) {
      const int32_t sel = src_dst_.at(s, d);
      const auto sel0 =
          ts > 0 ? static_cast<int32_t>(std::llround(static_cast<double>(sel) * t0 / ts)) : 0;
      mb_src_dst_.at(s, d) = mb == 0 ? sel0 : sel - sel0;
    }
  }
}

CollectiveTimes ExactMoeLayer::time_microbatch(int32_t mb, const MoeSpec& m, StepState& state) {
  std::swap(src_dst_, mb_src_dst_);
  count_unique_tokens(m.top_k, state);
  CollectiveTimes t;
  run_dispatch(/*with_background=*/mb == 0, state, t);
  run_combine(state, t);
  std::swap(src_dst_, mb_src_dst_);
  return t;
}

void ExactMoeLayer::end_microbatches(const MoeLayerCall& call, const CollectiveTimes& total,
                                     StepState& state) {
  std::copy(whole_dst_selections_.begin(), whole_dst_selections_.end(), dst_selections_.begin());
  if (call.observer) {
    call.observer->on_routing(call.layer_idx, call.moe_idx, src_dst_, total.dispatch_bytes,
                              total.combine_bytes);
  }
}

}  // namespace moesim::sim
