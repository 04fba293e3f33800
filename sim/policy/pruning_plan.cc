#include "sim/policy/pruning_plan.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <span>

#include "base/check.h"
#include "base/json_depth.h"
#include "sim/config/config_error.h"

namespace moesim::sim {

int32_t PruningPlan::num_pruned_for(double fraction, int32_t num_experts) {
  return static_cast<int32_t>(std::lround(fraction * static_cast<double>(num_experts)));
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

std::vector<int32_t> PruningPlan::kept(int32_t moe_layer_idx) const {
  std::vector<int32_t> out;
  out.reserve(num_kept_per_layer());
  for (int32_t e = 0; e < num_experts_; ++e) {
    if (!is_pruned(moe_layer_idx, e)) out.push_back(e);
  }
  return out;
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
  nlohmann::json j;
  try {
    j = parse_json(text, false);
  } catch (const JsonDepthError& e) {
    fail("", e.what());
  }
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

}  // namespace moesim::sim
