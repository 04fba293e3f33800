#include "sim/routing/synthetic_popularity.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "base/check.h"
#include "sim/core/state_version.h"
#include "sim/routing/popularity.h"

namespace moesim::sim {

SyntheticPopularity::SyntheticPopularity(const RoutingShape& shape, RoutingSpec spec, uint64_t seed)
    : shape_(shape), spec_(std::move(spec)), seed_(seed) {
  validate_routing_shape(shape_, "routing shape");
  validate_routing_spec(spec_, shape_, "routing spec");
  const int32_t num_domains = spec_.num_domains();
  double total_weight = 0.0;
  for (int32_t d = 0; d < num_domains; ++d) {
    domain_weights_.push_back(spec_.domains.empty() ? 1.0 : spec_.domains[d].weight);
    total_weight += domain_weights_.back();
  }
  for (double& w : domain_weights_) w /= total_weight;
  for (int32_t l = 0; l < shape_.num_moe_layers; ++l) {
    auto layer = std::make_unique<Layer>(seed_, l);
    layer->skew = spec_.layer_skew(l, shape_.num_moe_layers);
    if (layer->skew.popularity == PopularityKind::kZipf) {
      auto [it, added] = zipf_tables_.try_emplace(layer->skew.zipf_s);
      if (added) it->second = zipf_weights(shape_.num_experts, layer->skew.zipf_s);
      layer->zipf_table = &it->second;
    }
    const int32_t cluster_size = layer->skew.coactivation.cluster_size;
    if (cluster_size > 0 && layer->skew.coactivation.prob > 0.0) {
      // Clusters: each group's experts in a random order, cut into runs of cluster_size.
      RngStream rng(seed_, "routing.coact.L" + std::to_string(l));
      const int32_t per_group = shape_.experts_per_group();
      std::vector<int32_t> perm(per_group);
      layer->cluster_of_expert.assign(shape_.num_experts, -1);
      for (int32_t g = 0; g < shape_.num_groups; ++g) {
        random_permutation(rng, perm);
        for (int32_t i = 0; i < per_group; ++i) {
          layer->cluster_of_expert[g * per_group + perm[i]] = (g * per_group + i) / cluster_size;
        }
      }
    }
    layers_.push_back(std::move(layer));
  }
}

SyntheticPopularity::~SyntheticPopularity() = default;

int64_t SyntheticPopularity::epoch_of(int32_t moe_layer_idx, int64_t step_idx) {
  MOESIM_CHECK(moe_layer_idx >= 0 && moe_layer_idx < shape_.num_moe_layers, "layer range");
  MOESIM_CHECK(step_idx >= 0, "step must be >= 0");
  Layer& layer = *layers_[moe_layer_idx];
  const DriftSpec& drift = layer.skew.drift;
  if (!drift.enabled) return 0;
  while (layer.epoch_starts.back() <= step_idx) {
    double length = drift.mean_epoch_steps;
    if (drift.epoch_cv > 0.0) {
      const double shape = 1.0 / (drift.epoch_cv * drift.epoch_cv);
      length = gamma(layer.drift_rng, shape, drift.mean_epoch_steps / shape);
    }
    layer.epoch_starts.push_back(layer.epoch_starts.back() +
                                 std::max<int64_t>(1, std::llround(length)));
  }
  const auto it = std::upper_bound(layer.epoch_starts.begin(), layer.epoch_starts.end(), step_idx);
  return static_cast<int64_t>(it - layer.epoch_starts.begin()) - 1;
}

int64_t SyntheticPopularity::epoch_start_step(int32_t moe_layer_idx, int64_t epoch_idx) {
  Layer& layer = *layers_[moe_layer_idx];
  if (!layer.skew.drift.enabled) return 0;
  while (static_cast<int64_t>(layer.epoch_starts.size()) <= epoch_idx) {
    epoch_of(moe_layer_idx, layer.epoch_starts.back());
  }
  return layer.epoch_starts[epoch_idx];
}

std::shared_ptr<SyntheticPopularity::Epoch> SyntheticPopularity::epoch(int32_t moe_layer_idx,
                                                                       int64_t epoch_idx) {
  Layer& layer = *layers_[moe_layer_idx];
  if (auto it = layer.epochs.find(epoch_idx); it != layer.epochs.end()) return it->second;
  auto e = std::make_shared<Epoch>();
  const int32_t num_experts = shape_.num_experts;
  const size_t num_domains = domain_weights_.size();
  e->popularity.resize(num_domains);
  e->pi.resize(num_domains);
  e->mix_pi.assign(num_experts, 0.0);
  for (size_t d = 0; d < num_domains; ++d) {
    e->popularity[d].resize(num_experts);
    e->pi[d].resize(num_experts);
    RngStream rng(seed_, "routing.pop.L" + std::to_string(moe_layer_idx) + ".D" +
                             std::to_string(d) + ".E" + std::to_string(epoch_idx));
    draw_popularity(
        layer.skew, rng, e->popularity[d],
        layer.zipf_table ? std::span<const double>(*layer.zipf_table) : std::span<const double>());
    if (layer.cluster_of_expert.empty()) {
      sim::selection_shares(shape_, e->popularity[d], e->pi[d]);
    } else {
      coactivated_selection_shares(shape_, e->popularity[d], layer.skew.coactivation.prob,
                                   layer.skew.coactivation.cluster_size, layer.cluster_of_expert,
                                   e->pi[d]);
    }
    for (int32_t x = 0; x < num_experts; ++x) e->mix_pi[x] += domain_weights_[d] * e->pi[d][x];
  }
  e->version = next_state_version();
  layer.epochs.emplace(epoch_idx, e);
  // Keep every epoch a model holds and the latest few others (a replica behind the others
  // reaches them later); forget the oldest of the others beyond that.
  constexpr size_t kKeptUnheld = 4;
  size_t unheld = 0;
  for (const auto& [idx, held] : layer.epochs) unheld += held.use_count() == 1;
  for (auto it = layer.epochs.begin(); unheld > kKeptUnheld && it != layer.epochs.end();) {
    if (it->second.use_count() == 1) {
      it = layer.epochs.erase(it);
      --unheld;
    } else {
      ++it;
    }
  }
  return e;
}

std::shared_ptr<SyntheticPopularity::GpuShares> SyntheticPopularity::gpu_shares(
    Epoch& epoch, std::span<const int32_t> gpu_of_expert, int32_t num_dst_gpus, int32_t num_rows) {
  const auto size = static_cast<size_t>(num_rows) * num_dst_gpus;
  std::erase_if(epoch.gpu, [](const std::weak_ptr<GpuShares>& w) { return w.expired(); });
  for (const std::weak_ptr<GpuShares>& w : epoch.gpu) {
    std::shared_ptr<GpuShares> g = w.lock();
    if (g->rows == num_rows && g->shares.size() == size &&
        std::equal(gpu_of_expert.begin(), gpu_of_expert.end(), g->placement.begin(),
                   g->placement.end())) {
      return g;
    }
  }
  auto g = std::make_shared<GpuShares>();
  g->rows = num_rows;
  g->placement.assign(gpu_of_expert.begin(), gpu_of_expert.end());
  std::vector<double>& shares = g->shares;
  shares.assign(size, 0.0);
  for (int32_t e = 0; e < shape_.num_experts; ++e) {
    const int32_t gpu = gpu_of_expert[e];
    MOESIM_CHECK(gpu >= 0 && gpu < num_dst_gpus, "expert GPU out of range");
    if (num_rows == 1) {
      shares[gpu] += epoch.mix_pi[e];
      continue;
    }
    for (int32_t d = 0; d < num_rows; ++d) {
      shares[static_cast<size_t>(d) * num_dst_gpus + gpu] += epoch.pi[d][e];
    }
  }
  epoch.gpu.push_back(g);
  return g;
}

}  // namespace moesim::sim
