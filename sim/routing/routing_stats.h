// Statistics of routing counts: load imbalance, load distributions, and the activation profile
// that the expert-pruning policy consumes.
//
// Definitions (docs/routing.md, "Statistics"):
//  - imbalance ratio of loads x_1..x_n: (max - mean) / mean; 0 when every load is 0. 0 means
//    perfectly balanced; 1 means the busiest unit has twice the mean.
//  - by GPU: loads = selections received per destination GPU (column sums of a (src, dst)
//    matrix); by expert slot: loads = selections per physical expert slot (per expert when
//    every expert has one replica: column sums of a (src, expert) matrix).
//  - percentiles use the nearest-rank definition on the sorted loads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/routing/count_matrix.h"

namespace moesim::sim {

// (max - mean) / mean of `loads`; 0 for an empty or all-zero span.
double imbalance_ratio(std::span<const int64_t> loads);

// Column sums of a count matrix (selections per expert, or per destination GPU) into out
// (resized to num_cols).
void column_loads(const CountMatrix& counts, std::vector<int64_t>& out);

// Imbalance of one layer's routing: by GPU from selections per destination GPU, by expert slot
// from selections per expert. Precondition: both matrices come from the same tokens.
struct LayerImbalance {
  double by_gpu = 0.0;
  double by_expert_slot = 0.0;
};
LayerImbalance layer_imbalance(const CountMatrix& src_dst, const CountMatrix& src_expert);

// Summary of a load distribution (e.g. tokens per expert).
struct LoadSummary {
  int64_t min = 0;
  int64_t p50 = 0;
  int64_t p90 = 0;
  int64_t p99 = 0;
  int64_t max = 0;
  double mean = 0.0;
};
// Nearest-rank percentiles; all zero for an empty span.
LoadSummary summarize_loads(std::span<const int64_t> loads);
// The nearest-rank q-quantile (q in [0, 1]) of loads; 0 for an empty span.
int64_t load_percentile(std::span<const int64_t> loads, double q);

// Histogram of loads in bins of bin_width (>= 1): bin b counts loads in
// [b * bin_width, (b + 1) * bin_width); as many bins as the largest load needs.
std::vector<int64_t> load_histogram(std::span<const int64_t> loads, int64_t bin_width);

// Mean imbalance per layer over the steps added.
class ImbalanceTracker {
 public:
  explicit ImbalanceTracker(int32_t num_moe_layers);
  void add(int32_t moe_layer_idx, const LayerImbalance& imbalance);
  // Mean over the samples added for a layer (0 when none); mean over all samples of all layers.
  LayerImbalance layer_mean(int32_t moe_layer_idx) const;
  LayerImbalance overall_mean() const;
  int64_t num_samples(int32_t moe_layer_idx) const { return num_samples_[moe_layer_idx]; }

 private:
  std::vector<LayerImbalance> sums_;
  std::vector<int64_t> num_samples_;
};

// Activation profile: selections per (layer, expert), and co-activation counts n_ij (tokens whose
// top-k set holds both i and j) for the layers chosen at construction, from sampled token sets.
class ActivationProfile {
 public:
  // coactivation_layers: MoE layers whose n_ij are kept (num_experts^2 counters each).
  ActivationProfile(int32_t num_moe_layers, int32_t num_experts,
                    std::vector<int32_t> coactivation_layers = {});

  // Adds the column sums of a (src, expert) matrix to the layer's selection counts.
  void add_counts(int32_t moe_layer_idx, const CountMatrix& src_expert);
  // Adds token sets (token t owns experts[t * top_k .. (t + 1) * top_k), distinct experts): to
  // n_ij when the layer is tracked; counts sampled tokens. Does not change selection counts.
  void add_token_sets(int32_t moe_layer_idx, std::span<const int32_t> experts, int32_t top_k);

  int64_t selections(int32_t moe_layer_idx, int32_t expert_idx) const;
  std::span<const int64_t> layer_selections(int32_t moe_layer_idx) const;
  bool tracks_coactivation(int32_t moe_layer_idx) const;
  // n_ij (symmetric; n_ii = tokens that picked i). Precondition: the layer is tracked.
  int64_t coactivation(int32_t moe_layer_idx, int32_t expert_i, int32_t expert_j) const;
  int64_t num_sampled_tokens(int32_t moe_layer_idx) const { return sampled_tokens_[moe_layer_idx]; }
  int32_t num_moe_layers() const { return num_moe_layers_; }
  int32_t num_experts() const { return num_experts_; }

 private:
  int32_t num_moe_layers_;
  int32_t num_experts_;
  std::vector<int64_t> selections_;           // layer x expert
  std::vector<int32_t> coact_slot_of_layer_;  // -1 when not tracked
  std::vector<std::vector<int64_t>> coact_;   // per tracked layer: expert x expert
  std::vector<int64_t> sampled_tokens_;
};

}  // namespace moesim::sim
