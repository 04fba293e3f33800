#include "sim/policy/expert_pruning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "sim/config/config_error.h"
#include "sim/config/toml_source.h"
#include "sim/core/check.h"
#include "sim/core/distributions.h"
#include "sim/cost/roofline.h"
#include "sim/memory/memory_layout.h"
#include "sim/network/network_model.h"
#include "sim/serving/step_model.h"
#ifdef MOESIM_HAVE_SIMGRID
#include "sim/network/simgrid/simgrid_model.h"
#endif

namespace moesim::sim {
namespace {

std::vector<double> normalised_domain_weights(const RoutingSpec& spec) {
  std::vector<double> w;
  for (const DomainSpec& d : spec.domains) w.push_back(d.weight);
  if (w.empty()) w.push_back(1.0);
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= sum;
  return w;
}

// n tokens over domains by weight: floors, then the remainder to the largest fractional parts
// (ties to the lower domain).
std::vector<int32_t> split_tokens(int32_t n, std::span<const double> weights) {
  std::vector<int32_t> out(weights.size());
  std::vector<double> frac(weights.size());
  int32_t given = 0;
  for (size_t d = 0; d < weights.size(); ++d) {
    const double x = static_cast<double>(n) * weights[d];
    out[d] = static_cast<int32_t>(std::floor(x));
    frac[d] = x - out[d];
    given += out[d];
  }
  for (; given < n; ++given) {
    size_t best = 0;
    for (size_t d = 1; d < weights.size(); ++d) {
      if (frac[d] > frac[best]) best = d;
    }
    ++out[best];
    frac[best] = -1.0;
  }
  return out;
}

int32_t num_pruned_for(double fraction, int32_t num_experts) {
  return static_cast<int32_t>(std::lround(fraction * static_cast<double>(num_experts)));
}

}  // namespace

ExpertPruningConfig parse_expert_pruning_config(TomlTable& t) {
  ExpertPruningConfig c;
  c.fraction = t.get_double_in_or("fraction", 0.0, 1.0, c.fraction);
  if (c.fraction >= 1.0) t.fail("fraction", "must be in [0, 1)");
  c.dead_threshold = t.get_double_in_or("dead_threshold", 0.0, 1.0, c.dead_threshold);
  c.profile_steps =
      static_cast<int32_t>(t.get_int_in_or("profile_steps", 1, 1 << 20, c.profile_steps));
  c.tokens_per_step =
      static_cast<int32_t>(t.get_int_in_or("tokens_per_step", 1, 1 << 24, c.tokens_per_step));
  c.plan_file = t.get_string_or("plan_file", "");
  if (!c.plan_file.empty() && t.has("fraction")) {
    t.fail("plan_file", "give either fraction or plan_file, not both");
  }
  t.finish();
  return c;
}

ActivationProfile profile_activations(SyntheticRoutingModel& routing, int64_t first_step,
                                      int32_t num_steps, int32_t tokens_per_step,
                                      const std::vector<int32_t>& coactivation_layers) {
  const RoutingShape& shape = routing.shape();
  ActivationProfile profile(shape.num_moe_layers, shape.num_experts, coactivation_layers);
  const std::vector<int32_t> per_domain =
      split_tokens(tokens_per_step, normalised_domain_weights(routing.spec()));
  std::vector<int32_t> experts;
  CountMatrix counts;
  for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
    for (int64_t step = first_step; step < first_step + num_steps; ++step) {
      counts.reset(1, shape.num_experts);
      for (int32_t d = 0; d < static_cast<int32_t>(per_domain.size()); ++d) {
        if (per_domain[d] == 0) continue;
        routing.sample_token_experts(step, l, d, per_domain[d], experts);
        profile.add_token_sets(l, experts, shape.top_k);
        for (int32_t e : experts) ++counts.at(0, e);
      }
      profile.add_counts(l, counts);
    }
  }
  return profile;
}

double activation_rate(const ActivationProfile& profile, int32_t moe_layer_idx,
                       int32_t expert_idx) {
  const int64_t tokens = profile.num_sampled_tokens(moe_layer_idx);
  if (tokens == 0) return 0.0;
  return static_cast<double>(profile.selections(moe_layer_idx, expert_idx)) /
         static_cast<double>(tokens);
}

std::vector<double> coactivation_affinity(const ActivationProfile& profile, int32_t moe_layer_idx) {
  MOESIM_CHECK(profile.tracks_coactivation(moe_layer_idx), "the layer tracks co-activation");
  const int32_t n = profile.num_experts();
  std::vector<double> c(static_cast<size_t>(n) * n, 0.0);
  for (int32_t i = 0; i < n; ++i) {
    const double ni = static_cast<double>(profile.coactivation(moe_layer_idx, i, i));
    for (int32_t j = 0; j < n; ++j) {
      const double nj = static_cast<double>(profile.coactivation(moe_layer_idx, j, j));
      if (ni == 0.0 || nj == 0.0) continue;
      c[static_cast<size_t>(i) * n + j] =
          static_cast<double>(profile.coactivation(moe_layer_idx, i, j)) / std::sqrt(ni * nj);
    }
  }
  return c;
}

std::vector<int32_t> dead_experts(const ActivationProfile& profile, int32_t moe_layer_idx,
                                  double threshold) {
  std::vector<int32_t> out;
  for (int32_t e = 0; e < profile.num_experts(); ++e) {
    if (activation_rate(profile, moe_layer_idx, e) < threshold) out.push_back(e);
  }
  return out;
}

PruningPlan PruningPlan::least_activated(const ActivationProfile& profile, double fraction,
                                         int32_t top_k) {
  MOESIM_CHECK(fraction >= 0.0 && fraction < 1.0, "fraction in [0, 1)");
  PruningPlan plan;
  plan.num_experts_ = profile.num_experts();
  plan.num_pruned_ = num_pruned_for(fraction, plan.num_experts_);
  MOESIM_CHECK(plan.num_experts_ - plan.num_pruned_ >= top_k, "at least top_k experts kept");
  plan.is_pruned_.assign(static_cast<size_t>(profile.num_moe_layers()) * plan.num_experts_, 0);
  std::vector<int32_t> order(plan.num_experts_);
  for (int32_t l = 0; l < profile.num_moe_layers(); ++l) {
    std::iota(order.begin(), order.end(), 0);
    const std::span<const int64_t> sel = profile.layer_selections(l);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return sel[a] < sel[b]; });
    std::vector<int32_t> pruned(order.begin(), order.begin() + plan.num_pruned_);
    std::sort(pruned.begin(), pruned.end());
    for (int32_t e : pruned) plan.is_pruned_[static_cast<size_t>(l) * plan.num_experts_ + e] = 1;
    plan.pruned_.push_back(std::move(pruned));
  }
  return plan;
}

PruningPlan PruningPlan::from_layers(int32_t num_experts,
                                     std::vector<std::vector<int32_t>> pruned) {
  PruningPlan plan;
  plan.num_experts_ = num_experts;
  plan.num_pruned_ = pruned.empty() ? 0 : static_cast<int32_t>(pruned.front().size());
  MOESIM_CHECK(plan.num_pruned_ < num_experts, "an expert stays");
  plan.is_pruned_.assign(pruned.size() * static_cast<size_t>(num_experts), 0);
  for (size_t l = 0; l < pruned.size(); ++l) {
    std::sort(pruned[l].begin(), pruned[l].end());
    MOESIM_CHECK(static_cast<int32_t>(pruned[l].size()) == plan.num_pruned_,
                 "the same count in every layer");
    for (int32_t e : pruned[l]) {
      MOESIM_CHECK(e >= 0 && e < num_experts, "expert in range");
      uint8_t& flag = plan.is_pruned_[l * static_cast<size_t>(num_experts) + e];
      MOESIM_CHECK(flag == 0, "distinct experts");
      flag = 1;
    }
  }
  plan.pruned_ = std::move(pruned);
  return plan;
}

std::string format_pruning_plan_json(const PruningPlan& plan, const std::string& model_name,
                                     double fraction) {
  nlohmann::ordered_json j;
  j["model"] = model_name;
  j["num_moe_layers"] = plan.num_moe_layers();
  j["num_experts"] = plan.num_experts();
  j["fraction"] = fraction;
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (int32_t l = 0; l < plan.num_moe_layers(); ++l) layers.push_back(plan.pruned(l));
  j["pruned"] = layers;
  return j.dump() + "\n";
}

PruningPlan parse_pruning_plan_json(const std::string& text, const std::string& source,
                                    const RoutingShape& shape) {
  auto fail = [&](const std::string& key, const std::string& reason) {
    throw ConfigError(source, 0, 0, key, reason);
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("", "not a JSON object");
  if (!j.contains("num_experts") || !j["num_experts"].is_number_integer() ||
      j["num_experts"].get<int64_t>() != shape.num_experts) {
    fail("num_experts", "must be the model's " + std::to_string(shape.num_experts));
  }
  if (!j.contains("pruned") || !j["pruned"].is_array() ||
      static_cast<int32_t>(j["pruned"].size()) != shape.num_moe_layers) {
    fail("pruned", "must list the pruned experts of each of the " +
                       std::to_string(shape.num_moe_layers) + " MoE layers");
  }
  std::vector<std::vector<int32_t>> pruned;
  for (const nlohmann::json& layer : j["pruned"]) {
    const std::string key = "pruned[" + std::to_string(pruned.size()) + "]";
    if (!layer.is_array()) fail(key, "must be an array of expert ids");
    std::vector<int32_t> ids;
    std::vector<bool> seen(shape.num_experts, false);
    for (const nlohmann::json& x : layer) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= shape.num_experts ||
          seen[x.get<int64_t>()]) {
        fail(key, "expert ids must be distinct integers in [0, " +
                      std::to_string(shape.num_experts) + ")");
      }
      seen[x.get<int64_t>()] = true;
      ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
    if (!pruned.empty() && ids.size() != pruned.front().size()) {
      fail(key, "every layer must prune the same number of experts");
    }
    if (shape.num_experts - static_cast<int32_t>(ids.size()) < shape.top_k) {
      fail(key, "keeps fewer than top_k = " + std::to_string(shape.top_k) + " experts");
    }
    pruned.push_back(std::move(ids));
  }
  return PruningPlan::from_layers(shape.num_experts, std::move(pruned));
}

std::vector<int32_t> PruningPlan::kept(int32_t moe_layer_idx) const {
  std::vector<int32_t> out;
  out.reserve(num_kept_per_layer());
  for (int32_t e = 0; e < num_experts_; ++e) {
    if (!is_pruned(moe_layer_idx, e)) out.push_back(e);
  }
  return out;
}

double RerouteStats::mass_lost() const {
  return num_selections == 0
             ? 0.0
             : static_cast<double>(num_pruned_selections) / static_cast<double>(num_selections);
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

RerouteStats held_out_reroute(SyntheticRoutingModel& sampler, const PruningPlan& plan,
                              int64_t first_step, int32_t num_steps, int32_t tokens_per_step,
                              uint64_t root_seed) {
  const RoutingShape& shape = sampler.shape();
  const std::vector<int32_t> per_domain =
      split_tokens(tokens_per_step, normalised_domain_weights(sampler.spec()));
  RerouteStats total;
  std::vector<int32_t> sets;
  std::vector<double> pop;
  for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
    for (int64_t step = first_step; step < first_step + num_steps; ++step) {
      for (int32_t d = 0; d < static_cast<int32_t>(per_domain.size()); ++d) {
        if (per_domain[d] == 0) continue;
        const std::span<const double> p = sampler.popularity(l, step, d);
        pop.assign(p.begin(), p.end());
        sampler.sample_token_experts(step, l, d, per_domain[d], sets);
        RngStream rng(root_seed, "prune.reroute.L" + std::to_string(l) + ".S" +
                                     std::to_string(step) + ".D" + std::to_string(d));
        total.add(reroute_token_sets(plan, l, pop, shape.top_k, sets, rng));
      }
    }
  }
  return total;
}

ModelCard pruned_model_card(const ModelCard& card, int32_t num_kept) {
  ModelCard out = card;
  for (LayerSpec& l : out.layers) {
    if (!l.ffn.is_moe) continue;
    MOESIM_CHECK(num_kept >= l.ffn.moe.top_k && num_kept <= l.ffn.moe.num_routed_experts,
                 "kept experts in [top_k, experts]");
    l.ffn.moe.num_routed_experts = num_kept;
    l.ffn.moe.num_expert_groups = 1;
    l.ffn.moe.topk_groups = 1;
  }
  return out;
}

ExpertPlacement repacked_placement(int32_t num_kept, int32_t num_gpus, int32_t gpus_per_node,
                                   int32_t num_shared_experts) {
  std::vector<std::vector<int32_t>> replicas(num_kept);
  for (int32_t i = 0; i < num_kept; ++i) {
    replicas[i] = {static_cast<int32_t>(static_cast<int64_t>(i) * num_gpus / num_kept)};
  }
  return ExpertPlacement(num_kept, num_gpus, gpus_per_node, num_shared_experts, std::move(replicas),
                         "pruned placement");
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

// ---- The pruning study ------------------------------------------------------------------------

PruningStudy run_pruning_study(const Scenario& sc, const PruningStudyOptions& opt) {
  const ModelCard& card = *sc.model;
  const Topology& topo = *sc.topology;
  const DeploymentSpec& dep = sc.deployment;
  if (num_moe_layers(card) == 0) {
    throw ConfigError(sc.source_file, 0, 0, "model", card.name + " has no MoE layer to prune");
  }
  const RoutingShape shape = routing_shape_of(card);
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  for (double f : opt.fractions) {
    if (!(f >= 0.0 && f < 1.0) ||
        shape.num_experts - num_pruned_for(f, shape.num_experts) < shape.top_k) {
      throw ConfigError("moesim prune", 0, 0, "fractions",
                        "fraction " + std::to_string(f) + " must be in [0, 1) and keep at least " +
                            std::to_string(shape.top_k) + " of the " +
                            std::to_string(shape.num_experts) + " experts (top_k)");
    }
  }
  MOESIM_CHECK(opt.batch_per_gpu >= 1 && opt.context_tokens >= 1 && opt.num_timed_steps >= 1,
               "study options in range");
  PruningStudy study;
  study.scenario_name = sc.name;
  study.model_name = card.name;
  study.num_gpus = dep.gpus_per_replica;
  study.num_experts = shape.num_experts;
  study.num_moe_layers = shape.num_moe_layers;
  study.options = opt;
  const int32_t num_steps = opt.profile.profile_steps;
  study.profiled_tokens_per_layer = static_cast<int64_t>(num_steps) * opt.profile.tokens_per_step;

  // Profile steps [0, P); measure re-routing on held-out steps [P, 2P).
  const uint64_t routing_seed = RngStream(sc.run.seed, "routing.replica.0").next_u64();
  SyntheticRoutingModel sampler(shape, sc.routing, routing_seed);
  const ActivationProfile profile =
      profile_activations(sampler, 0, num_steps, opt.profile.tokens_per_step, {});
  for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
    study.num_dead_experts +=
        static_cast<int32_t>(dead_experts(profile, l, opt.profile.dead_threshold).size());
  }
  std::vector<PruningPlan> plans;
  for (double f : opt.fractions) {
    plans.push_back(PruningPlan::least_activated(profile, f, shape.top_k));
  }
  const size_t num_fractions = plans.size();
  std::vector<RerouteStats> total(num_fractions);
  std::vector<double> max_layer_loss(num_fractions, 0.0);
  const std::vector<int32_t> per_domain =
      split_tokens(opt.profile.tokens_per_step, normalised_domain_weights(sc.routing));
  std::vector<int32_t> sets, copy;
  std::vector<double> pop;
  for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
    std::vector<RerouteStats> layer(num_fractions);
    for (int64_t step = num_steps; step < 2LL * num_steps; ++step) {
      for (int32_t d = 0; d < static_cast<int32_t>(per_domain.size()); ++d) {
        if (per_domain[d] == 0) continue;
        const std::span<const double> p = sampler.popularity(l, step, d);
        pop.assign(p.begin(), p.end());
        sampler.sample_token_experts(step, l, d, per_domain[d], sets);
        for (size_t f = 0; f < num_fractions; ++f) {
          copy = sets;
          RngStream rng(routing_seed, "prune.reroute.L" + std::to_string(l) + ".S" +
                                          std::to_string(step) + ".D" + std::to_string(d));
          layer[f].add(reroute_token_sets(plans[f], l, pop, shape.top_k, copy, rng));
        }
      }
    }
    for (size_t f = 0; f < num_fractions; ++f) {
      total[f].add(layer[f]);
      max_layer_loss[f] = std::max(max_layer_loss[f], layer[f].mass_lost());
    }
  }

  // Memory and decode step time per fraction, for replica 0.
  const RooflineCostModel cost(topo.gpu_spec(), sc.cost.roofline);
  NetworkModelRegistry registry;
#ifdef MOESIM_HAVE_SIMGRID
  register_simgrid_model(registry);
#endif
  const int32_t num_gpus = dep.gpus_per_replica;
  const int32_t gpus_per_node = std::min(num_gpus, topo.gpus_per_node());
  const int32_t tp = dep.attention == AttentionParallel::kTensor ? dep.attention_tp : 1;
  std::vector<GpuId> gpus;
  for (int32_t g = 0; g < num_gpus; ++g) gpus.emplace_back(g);
  const std::vector<std::vector<SeqSlice>> ranks(
      num_gpus / tp,
      std::vector<SeqSlice>(opt.batch_per_gpu, SeqSlice{1, opt.context_tokens, false}));
  for (size_t f = 0; f < num_fractions; ++f) {
    const PruningPlan& plan = plans[f];
    const int32_t kept = plan.num_kept_per_layer();
    const ModelCard pcard = pruned_model_card(card, kept);
    const ExpertPlacement placement = repacked_placement(
        kept, num_gpus, gpus_per_node, static_cast<int32_t>(moe->num_shared_experts));
    GpuMemoryInputs mem;
    mem.hbm_bytes = topo.gpu_spec().hbm_bytes;
    mem.attention_tp = tp;
    mem.kv_block_tokens = sc.scheduler.kv_block_tokens;
    mem.workspace_bytes = static_cast<int64_t>(sc.scheduler.workspace_gib * (1LL << 30));
    mem.reserve_fraction = sc.scheduler.hbm_reserve_fraction;
    mem.routed_expert_slots =
        static_cast<int64_t>(placement.max_slots_per_gpu()) * shape.num_moe_layers;
    std::string error;
    const GpuMemoryLayout layout = compute_gpu_memory_layout(pcard, mem, &error);
    if (!error.empty()) {
      throw ConfigError(
          sc.source_file, 0, 0, "deployment",
          card.name + " pruned to " + std::to_string(kept) + " experts per layer " + error);
    }
    SyntheticRoutingModel inner(shape, sc.routing, routing_seed);
    PrunedRoutingModel routing(inner, plan);
    const std::unique_ptr<NetworkModel> network = registry.make(sc.network_model, topo);
    StepModel step(pcard, topo, dep, gpus, &placement, cost, network.get(), &routing);
    double step_s = 0.0;
    for (int32_t i = 0; i < opt.num_timed_steps; ++i) {
      step_s += to_seconds(step.run(i, ranks, nullptr).duration_ns);
    }
    PruningStudyRow row;
    row.fraction = opt.fractions[f];
    row.experts_kept_per_layer = kept;
    row.expert_slots_per_gpu = placement.max_slots_per_gpu();
    row.weight_bytes_per_gpu = layout.weight_bytes();
    row.kv_pool_bytes_per_gpu = layout.kv_pool_bytes;
    const int64_t blocks_per_seq =
        (opt.context_tokens + sc.scheduler.kv_block_tokens - 1) / sc.scheduler.kv_block_tokens +
        layout.state_blocks_per_sequence;
    row.max_decode_batch_per_gpu = layout.num_kv_blocks / std::max<int64_t>(1, blocks_per_seq);
    row.decode_step_s = step_s / opt.num_timed_steps;
    row.routing_mass_lost = total[f].mass_lost();
    row.max_layer_mass_lost = max_layer_loss[f];
    row.tokens_rerouted = total[f].num_tokens == 0
                              ? 0.0
                              : static_cast<double>(total[f].num_tokens_affected) /
                                    static_cast<double>(total[f].num_tokens);
    study.rows.push_back(row);
  }
  study.plans = std::move(plans);
  return study;
}

std::string format_pruning_study_text(const PruningStudy& s) {
  const PruningStudyOptions& o = s.options;
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "expert pruning: %s (%s), EP%d, %d experts x %d MoE layers\n"
                "profile: %lld tokens per layer (%d steps), %d dead experts (rate < %g) over all "
                "layers; mass lost on the next %d steps\n"
                "decode step: %lld sequences per attention rank at %lld tokens of context, mean "
                "of %d steps\n\n",
                s.scenario_name.c_str(), s.model_name.c_str(), s.num_gpus, s.num_experts,
                s.num_moe_layers, static_cast<long long>(s.profiled_tokens_per_layer),
                o.profile.profile_steps, s.num_dead_experts, o.profile.dead_threshold,
                o.profile.profile_steps, static_cast<long long>(o.batch_per_gpu),
                static_cast<long long>(o.context_tokens), o.num_timed_steps);
  out += buf;
  std::snprintf(buf, sizeof buf, "%6s %6s %9s %12s %12s %10s %11s %10s %10s %10s\n", "pruned",
                "kept", "slots/GPU", "weights/GPU", "KV pool/GPU", "max batch", "decode step",
                "mass lost", "max layer", "rerouted");
  out += buf;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  for (const PruningStudyRow& r : s.rows) {
    std::snprintf(buf, sizeof buf,
                  "%5.0f%% %6d %9d %8.1f GiB %8.1f GiB %10lld %8.2f ms %9.2f%% %9.2f%% %9.2f%%\n",
                  100.0 * r.fraction, r.experts_kept_per_layer, r.expert_slots_per_gpu,
                  r.weight_bytes_per_gpu / gib, r.kv_pool_bytes_per_gpu / gib,
                  static_cast<long long>(r.max_decode_batch_per_gpu), 1e3 * r.decode_step_s,
                  100.0 * r.routing_mass_lost, 100.0 * r.max_layer_mass_lost,
                  100.0 * r.tokens_rerouted);
    out += buf;
  }
  return out;
}

std::string format_pruning_study_json(const PruningStudy& s) {
  nlohmann::ordered_json j;
  j["scenario"] = s.scenario_name;
  j["model"] = s.model_name;
  j["num_gpus"] = s.num_gpus;
  j["num_experts"] = s.num_experts;
  j["num_moe_layers"] = s.num_moe_layers;
  j["profiled_tokens_per_layer"] = s.profiled_tokens_per_layer;
  j["num_dead_experts"] = s.num_dead_experts;
  j["dead_threshold"] = s.options.profile.dead_threshold;
  j["batch_per_gpu"] = s.options.batch_per_gpu;
  j["context_tokens"] = s.options.context_tokens;
  j["num_timed_steps"] = s.options.num_timed_steps;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const PruningStudyRow& r : s.rows) {
    nlohmann::ordered_json x;
    x["fraction"] = r.fraction;
    x["experts_kept_per_layer"] = r.experts_kept_per_layer;
    x["expert_slots_per_gpu"] = r.expert_slots_per_gpu;
    x["weight_bytes_per_gpu"] = r.weight_bytes_per_gpu;
    x["kv_pool_bytes_per_gpu"] = r.kv_pool_bytes_per_gpu;
    x["max_decode_batch_per_gpu"] = r.max_decode_batch_per_gpu;
    x["decode_step_s"] = r.decode_step_s;
    x["routing_mass_lost"] = r.routing_mass_lost;
    x["max_layer_mass_lost"] = r.max_layer_mass_lost;
    x["tokens_rerouted"] = r.tokens_rerouted;
    rows.push_back(x);
  }
  j["rows"] = rows;
  return j.dump(2) + "\n";
}

}  // namespace moesim::sim
