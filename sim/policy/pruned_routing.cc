#include "sim/policy/pruned_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "base/check.h"
#include "sim/core/distributions.h"
#include "sim/policy/activation_profile.h"

namespace moesim::sim {

double RerouteStats::mass_lost() const {
  return num_selections == 0
             ? 0.0
             : static_cast<double>(num_pruned_selections) / static_cast<double>(num_selections);
}

double RerouteStats::tokens_affected_fraction() const {
  return num_tokens == 0
             ? 0.0
             : static_cast<double>(num_tokens_affected) / static_cast<double>(num_tokens);
}

void RerouteStats::add(const RerouteStats& o) {
  num_tokens += o.num_tokens;
  num_selections += o.num_selections;
  num_pruned_selections += o.num_pruned_selections;
  num_tokens_affected += o.num_tokens_affected;
}

RerouteStats reroute_token_sets(const PruningPlan& plan, int32_t moe_layer_idx,
                                std::span<const double> popularity, int32_t top_k,
                                std::span<int32_t> experts, RngStream& rng) {
  const int32_t num_experts = plan.num_experts();
  MOESIM_CHECK(static_cast<int32_t>(popularity.size()) == num_experts, "one weight per expert");
  MOESIM_CHECK(plan.num_kept_per_layer() >= top_k, "at least top_k experts kept");
  MOESIM_CHECK(experts.size() % static_cast<size_t>(top_k) == 0, "whole tokens");
  RerouteStats stats;
  stats.num_tokens = static_cast<int64_t>(experts.size()) / top_k;
  stats.num_selections = static_cast<int64_t>(experts.size());
  if (plan.num_pruned_per_layer() == 0) return stats;
  std::vector<double> kept_weights(num_experts, 0.0);
  for (int32_t e = 0; e < num_experts; ++e) {
    if (!plan.is_pruned(moe_layer_idx, e)) kept_weights[e] = popularity[e];
  }
  const CategoricalDistribution next_choice(kept_weights);
  std::vector<uint8_t> picked(num_experts, 0);
  std::vector<int32_t> replaced;
  for (size_t t = 0; t < experts.size(); t += top_k) {
    const std::span<int32_t> set = experts.subspan(t, top_k);
    for (int32_t e : set) picked[e] = 1;
    replaced.clear();
    for (int32_t& e : set) {
      if (!plan.is_pruned(moe_layer_idx, e)) continue;
      replaced.push_back(e);
      int32_t x = -1;
      for (int attempt = 0; attempt < 64 && x < 0; ++attempt) {
        const auto y = static_cast<int32_t>(next_choice.sample(rng));
        if (!picked[y]) x = y;
      }
      if (x < 0) {  // exact fallback: a linear draw over the available experts
        double total = 0.0;
        for (int32_t y = 0; y < num_experts; ++y) total += picked[y] ? 0.0 : kept_weights[y];
        double u = rng.uniform01() * total;
        for (int32_t y = 0; y < num_experts && x < 0; ++y) {
          if (picked[y] || kept_weights[y] <= 0.0) continue;
          u -= kept_weights[y];
          if (u < 0.0) x = y;
        }
        for (int32_t y = num_experts - 1; x < 0 && y >= 0; --y) {
          if (!picked[y] && kept_weights[y] > 0.0) x = y;  // rounding left u at the top end
        }
      }
      MOESIM_CHECK(x >= 0, "a kept expert is available");
      picked[x] = 1;
      e = x;
    }
    stats.num_pruned_selections += static_cast<int64_t>(replaced.size());
    if (!replaced.empty()) ++stats.num_tokens_affected;
    for (int32_t e : set) picked[e] = 0;
    for (int32_t e : replaced) picked[e] = 0;
  }
  return stats;
}

std::vector<std::vector<RerouteStats>> held_out_reroute_per_layer(
    SyntheticRoutingModel& sampler, std::span<const PruningPlan> plans, int64_t first_step,
    int32_t num_steps, int32_t tokens_per_step, uint64_t root_seed) {
  const RoutingShape& shape = sampler.shape();
  for (const PruningPlan& plan : plans) {
    MOESIM_CHECK(
        plan.num_experts() == shape.num_experts && plan.num_moe_layers() == shape.num_moe_layers,
        "plan matches the routing shape");
  }
  const std::vector<int32_t> per_domain =
      tokens_per_domain(tokens_per_step, normalised_domain_weights(sampler.spec()));
  std::vector<std::vector<RerouteStats>> out(
      plans.size(), std::vector<RerouteStats>(static_cast<size_t>(shape.num_moe_layers)));
  std::vector<int32_t> sets, copy;
  std::vector<double> pop;
  for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
    for (int64_t step = first_step; step < first_step + num_steps; ++step) {
      for (int32_t d = 0; d < static_cast<int32_t>(per_domain.size()); ++d) {
        if (per_domain[d] == 0) continue;
        const std::span<const double> p = sampler.popularity(l, step, d);
        pop.assign(p.begin(), p.end());
        sampler.sample_token_experts(step, l, d, per_domain[d], sets);
        const std::string stream = "prune.reroute.L" + std::to_string(l) + ".S" +
                                   std::to_string(step) + ".D" + std::to_string(d);
        for (size_t f = 0; f < plans.size(); ++f) {
          copy = sets;
          RngStream rng(root_seed, stream);
          out[f][l].add(reroute_token_sets(plans[f], l, pop, shape.top_k, copy, rng));
        }
      }
    }
  }
  return out;
}

RerouteStats held_out_reroute(SyntheticRoutingModel& sampler, const PruningPlan& plan,
                              int64_t first_step, int32_t num_steps, int32_t tokens_per_step,
                              uint64_t root_seed) {
  const std::vector<std::vector<RerouteStats>> per_layer =
      held_out_reroute_per_layer(sampler, std::span<const PruningPlan>(&plan, 1), first_step,
                                 num_steps, tokens_per_step, root_seed);
  RerouteStats total;
  for (const RerouteStats& layer : per_layer.front()) total.add(layer);
  return total;
}

PrunedRoutingModel::PrunedRoutingModel(SyntheticRoutingModel& inner, const PruningPlan& plan)
    : inner_(inner),
      plan_(plan),
      shape_(inner.shape()),
      domain_weights_(normalised_domain_weights(inner.spec())) {
  MOESIM_CHECK(plan.num_experts() == inner.shape().num_experts &&
                   plan.num_moe_layers() == inner.shape().num_moe_layers,
               "plan matches the routing shape");
  shape_.num_experts = plan.num_kept_per_layer();
  shape_.num_groups = 1;
  shape_.topk_groups = 1;
}

void PrunedRoutingModel::route(const RoutingQuery& query, CountMatrix& out) {
  inner_.route(query, full_);
  const int32_t layer = query.moe_layer_idx;
  const std::vector<int32_t> kept = plan_.kept(layer);
  const auto num_kept = static_cast<int32_t>(kept.size());
  weights_.assign(num_kept, 0.0);
  for (size_t d = 0; d < domain_weights_.size(); ++d) {
    const std::span<const double> pop =
        inner_.popularity(layer, query.step_idx, static_cast<int32_t>(d));
    for (int32_t i = 0; i < num_kept; ++i) weights_[i] += domain_weights_[d] * pop[kept[i]];
  }
  const int32_t num_rows = full_.num_rows();
  out.reset(num_rows, num_kept);
  for (int32_t s = 0; s < num_rows; ++s) {
    const std::span<const int32_t> full_row = full_.row(s);
    const int64_t cap = query.tokens_per_src[s];
    int64_t rest = 0;
    for (int32_t e : plan_.pruned(layer)) rest += full_row[e];
    for (int32_t c : full_row) num_selections_ += c;
    num_rerouted_selections_ += rest;
    row_.assign(num_kept, 0);
    for (int32_t i = 0; i < num_kept; ++i) row_[i] = full_row[kept[i]];
    // Proportional shares of the rest, floored and capped, until all is placed; when every floor
    // is 0, one unit each to the heaviest open experts.
    while (rest > 0) {
      double open_weight = 0.0;
      for (int32_t i = 0; i < num_kept; ++i) open_weight += row_[i] < cap ? weights_[i] : 0.0;
      MOESIM_CHECK(open_weight > 0.0, "an expert below the cap");
      int64_t given = 0;
      for (int32_t i = 0; i < num_kept; ++i) {
        if (row_[i] >= cap) continue;
        const auto x = std::min<int64_t>(
            static_cast<int64_t>(std::floor(static_cast<double>(rest) * weights_[i] / open_weight)),
            cap - row_[i]);
        row_[i] += x;
        given += x;
      }
      rest -= given;
      if (given > 0 || rest == 0) continue;
      order_.resize(num_kept);
      std::iota(order_.begin(), order_.end(), 0);
      std::stable_sort(order_.begin(), order_.end(),
                       [&](int32_t a, int32_t b) { return weights_[a] > weights_[b]; });
      for (int32_t i : order_) {
        if (rest == 0) break;
        if (row_[i] >= cap) continue;
        ++row_[i];
        --rest;
      }
    }
    std::span<int32_t> out_row = out.row(s);
    for (int32_t i = 0; i < num_kept; ++i) out_row[i] = static_cast<int32_t>(row_[i]);
  }
}

}  // namespace moesim::sim
