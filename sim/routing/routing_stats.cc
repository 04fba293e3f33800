#include "sim/routing/routing_stats.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace moesim::sim {

double imbalance_ratio(std::span<const int64_t> loads) {
  if (loads.empty()) return 0.0;
  int64_t max_load = 0;
  double sum = 0.0;
  for (int64_t v : loads) {
    max_load = std::max(max_load, v);
    sum += static_cast<double>(v);
  }
  if (sum == 0.0) return 0.0;
  const double mean = sum / static_cast<double>(loads.size());
  return (static_cast<double>(max_load) - mean) / mean;
}

void column_loads(const CountMatrix& counts, std::vector<int64_t>& out) {
  out.resize(counts.num_cols());
  counts.col_sums(out);
}

LayerImbalance layer_imbalance(const CountMatrix& src_dst, const CountMatrix& src_expert) {
  MOESIM_CHECK(src_dst.total() == src_expert.total(), "matrices must hold the same selections");
  std::vector<int64_t> loads;
  LayerImbalance out;
  column_loads(src_dst, loads);
  out.by_gpu = imbalance_ratio(loads);
  column_loads(src_expert, loads);
  out.by_expert_slot = imbalance_ratio(loads);
  return out;
}

int64_t load_percentile(std::span<const int64_t> loads, double q) {
  MOESIM_CHECK(q >= 0.0 && q <= 1.0, "quantile in [0, 1]");
  if (loads.empty()) return 0;
  std::vector<int64_t> sorted(loads.begin(), loads.end());
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank: the ceil(q * n)-th smallest (1-based), at least the first.
  const auto n = static_cast<double>(sorted.size());
  const auto rank = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * n)));
  return sorted[rank - 1];
}

LoadSummary summarize_loads(std::span<const int64_t> loads) {
  LoadSummary s;
  if (loads.empty()) return s;
  s.min = *std::min_element(loads.begin(), loads.end());
  s.max = *std::max_element(loads.begin(), loads.end());
  s.p50 = load_percentile(loads, 0.5);
  s.p90 = load_percentile(loads, 0.9);
  s.p99 = load_percentile(loads, 0.99);
  double sum = 0.0;
  for (int64_t v : loads) sum += static_cast<double>(v);
  s.mean = sum / static_cast<double>(loads.size());
  return s;
}

std::vector<int64_t> load_histogram(std::span<const int64_t> loads, int64_t bin_width) {
  MOESIM_CHECK(bin_width >= 1, "bin width must be >= 1");
  std::vector<int64_t> bins;
  for (int64_t v : loads) {
    MOESIM_CHECK(v >= 0, "loads must be >= 0");
    const auto b = static_cast<size_t>(v / bin_width);
    if (bins.size() <= b) bins.resize(b + 1, 0);
    ++bins[b];
  }
  return bins;
}

ImbalanceTracker::ImbalanceTracker(int32_t num_moe_layers)
    : sums_(num_moe_layers), num_samples_(num_moe_layers, 0) {}

void ImbalanceTracker::add(int32_t moe_layer_idx, const LayerImbalance& imbalance) {
  sums_[moe_layer_idx].by_gpu += imbalance.by_gpu;
  sums_[moe_layer_idx].by_expert_slot += imbalance.by_expert_slot;
  ++num_samples_[moe_layer_idx];
}

LayerImbalance ImbalanceTracker::layer_mean(int32_t moe_layer_idx) const {
  const int64_t n = num_samples_[moe_layer_idx];
  if (n == 0) return {};
  return {sums_[moe_layer_idx].by_gpu / n, sums_[moe_layer_idx].by_expert_slot / n};
}

LayerImbalance ImbalanceTracker::overall_mean() const {
  LayerImbalance sum;
  int64_t n = 0;
  for (size_t l = 0; l < sums_.size(); ++l) {
    sum.by_gpu += sums_[l].by_gpu;
    sum.by_expert_slot += sums_[l].by_expert_slot;
    n += num_samples_[l];
  }
  if (n == 0) return {};
  return {sum.by_gpu / n, sum.by_expert_slot / n};
}

ActivationProfile::ActivationProfile(int32_t num_moe_layers, int32_t num_experts,
                                     std::vector<int32_t> coactivation_layers)
    : num_moe_layers_(num_moe_layers),
      num_experts_(num_experts),
      selections_(static_cast<size_t>(num_moe_layers) * num_experts, 0),
      coact_slot_of_layer_(num_moe_layers, -1),
      sampled_tokens_(num_moe_layers, 0) {
  for (int32_t l : coactivation_layers) {
    MOESIM_CHECK(l >= 0 && l < num_moe_layers, "co-activation layer out of range");
    if (coact_slot_of_layer_[l] >= 0) continue;
    coact_slot_of_layer_[l] = static_cast<int32_t>(coact_.size());
    coact_.emplace_back(static_cast<size_t>(num_experts) * num_experts, 0);
  }
}

void ActivationProfile::add_counts(int32_t moe_layer_idx, const CountMatrix& src_expert) {
  MOESIM_CHECK(moe_layer_idx >= 0 && moe_layer_idx < num_moe_layers_, "layer range");
  MOESIM_CHECK(src_expert.num_cols() == num_experts_, "one column per expert");
  int64_t* dst = selections_.data() + static_cast<size_t>(moe_layer_idx) * num_experts_;
  for (int32_t s = 0; s < src_expert.num_rows(); ++s) {
    const std::span<const int32_t> row = src_expert.row(s);
    for (int32_t e = 0; e < num_experts_; ++e) dst[e] += row[e];
  }
}

void ActivationProfile::add_token_sets(int32_t moe_layer_idx, std::span<const int32_t> experts,
                                       int32_t top_k) {
  MOESIM_CHECK(moe_layer_idx >= 0 && moe_layer_idx < num_moe_layers_, "layer range");
  MOESIM_CHECK(top_k >= 1 && experts.size() % top_k == 0, "whole token sets");
  const size_t num_tokens = experts.size() / top_k;
  sampled_tokens_[moe_layer_idx] += static_cast<int64_t>(num_tokens);
  const int32_t slot = coact_slot_of_layer_[moe_layer_idx];
  if (slot < 0) return;
  std::vector<int64_t>& n = coact_[slot];
  for (size_t t = 0; t < num_tokens; ++t) {
    const std::span<const int32_t> set = experts.subspan(t * top_k, top_k);
    for (int32_t i : set) {
      MOESIM_CHECK(i >= 0 && i < num_experts_, "expert out of range");
      for (int32_t j : set) ++n[static_cast<size_t>(i) * num_experts_ + j];
    }
  }
}

int64_t ActivationProfile::selections(int32_t moe_layer_idx, int32_t expert_idx) const {
  return selections_[static_cast<size_t>(moe_layer_idx) * num_experts_ + expert_idx];
}

std::span<const int64_t> ActivationProfile::layer_selections(int32_t moe_layer_idx) const {
  return {selections_.data() + static_cast<size_t>(moe_layer_idx) * num_experts_,
          static_cast<size_t>(num_experts_)};
}

bool ActivationProfile::tracks_coactivation(int32_t moe_layer_idx) const {
  return coact_slot_of_layer_[moe_layer_idx] >= 0;
}

int64_t ActivationProfile::coactivation(int32_t moe_layer_idx, int32_t expert_i,
                                        int32_t expert_j) const {
  const int32_t slot = coact_slot_of_layer_[moe_layer_idx];
  MOESIM_CHECK(slot >= 0, "layer's co-activation is not tracked");
  return coact_[slot][static_cast<size_t>(expert_i) * num_experts_ + expert_j];
}

}  // namespace moesim::sim
