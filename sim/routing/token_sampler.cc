#include "sim/routing/token_sampler.h"

#include "base/check.h"

namespace moesim::sim {
namespace {

constexpr int kMaxRejections = 64;

std::vector<double> group_weights(const RoutingShape& shape, std::span<const double> w) {
  std::vector<double> g(shape.num_groups, 0.0);
  for (int32_t e = 0; e < shape.num_experts; ++e) g[shape.group_of(e)] += w[e];
  return g;
}

}  // namespace

TokenSampler::TokenSampler(const RoutingShape& shape, std::span<const double> popularity,
                           std::span<const int32_t> cluster_of_expert, int32_t cluster_size,
                           double coactivation_prob)
    : shape_(shape),
      popularity_(popularity.begin(), popularity.end()),
      group_weight_(group_weights(shape, popularity)),
      expert_table_(popularity),
      group_table_(group_weight_),
      cluster_of_expert_(cluster_of_expert.begin(), cluster_of_expert.end()),
      cluster_size_(cluster_size),
      coactivation_prob_(cluster_of_expert.empty() ? 0.0 : coactivation_prob),
      group_allowed_(shape.num_groups, shape.topk_groups == shape.num_groups ? 1 : 0),
      expert_picked_(shape.num_experts, 0) {
  MOESIM_CHECK(popularity.size() == static_cast<size_t>(shape.num_experts), "popularity size");
  if (!cluster_of_expert_.empty()) {
    MOESIM_CHECK(cluster_of_expert_.size() == popularity.size(), "one cluster per expert");
    MOESIM_CHECK(cluster_size_ >= 2 && shape.num_experts % cluster_size_ == 0, "cluster size");
    const int32_t num_clusters = shape.num_experts / cluster_size_;
    std::vector<int32_t> fill(num_clusters, 0);
    cluster_members_.assign(shape.num_experts, -1);
    for (int32_t e = 0; e < shape.num_experts; ++e) {
      const int32_t c = cluster_of_expert_[e];
      MOESIM_CHECK(c >= 0 && c < num_clusters && fill[c] < cluster_size_, "cluster layout");
      cluster_members_[c * cluster_size_ + fill[c]++] = e;
    }
  }
}

int32_t TokenSampler::pick_group(RngStream& rng) {
  for (int i = 0; i < kMaxRejections; ++i) {
    const auto g = static_cast<int32_t>(group_table_.sample(rng));
    if (!group_allowed_[g]) return g;
  }
  double remaining = 0.0;
  for (int32_t g = 0; g < shape_.num_groups; ++g) {
    if (!group_allowed_[g]) remaining += group_weight_[g];
  }
  double u = rng.uniform01() * remaining;
  int32_t last = -1;
  for (int32_t g = 0; g < shape_.num_groups; ++g) {
    if (group_allowed_[g]) continue;
    last = g;
    u -= group_weight_[g];
    if (u < 0.0) return g;
  }
  return last;
}

int32_t TokenSampler::pick_expert(RngStream& rng) {
  for (int i = 0; i < kMaxRejections; ++i) {
    const auto e = static_cast<int32_t>(expert_table_.sample(rng));
    if (!expert_picked_[e] && group_allowed_[shape_.group_of(e)]) return e;
  }
  double remaining = 0.0;
  for (int32_t e = 0; e < shape_.num_experts; ++e) {
    if (!expert_picked_[e] && group_allowed_[shape_.group_of(e)]) remaining += popularity_[e];
  }
  double u = rng.uniform01() * remaining;
  int32_t last = -1;
  for (int32_t e = 0; e < shape_.num_experts; ++e) {
    if (expert_picked_[e] || !group_allowed_[shape_.group_of(e)]) continue;
    last = e;
    u -= popularity_[e];
    if (u < 0.0) return e;
  }
  return last;
}

int32_t TokenSampler::pick_mate(RngStream& rng, std::span<const int32_t> picked) {
  mate_candidates_.clear();
  for (int32_t e : picked) {
    const int32_t c = cluster_of_expert_[e];
    for (int32_t m = 0; m < cluster_size_; ++m) {
      const int32_t mate = cluster_members_[c * cluster_size_ + m];
      if (expert_picked_[mate]) continue;
      bool seen = false;
      for (int32_t x : mate_candidates_) seen = seen || x == mate;
      if (!seen) mate_candidates_.push_back(mate);
    }
  }
  if (mate_candidates_.empty()) return -1;
  return mate_candidates_[rng.uniform_int(mate_candidates_.size())];
}

void TokenSampler::sample(RngStream& rng, std::span<int32_t> experts_out) {
  MOESIM_CHECK(experts_out.size() == static_cast<size_t>(shape_.top_k), "top_k outputs");
  const bool limited = shape_.topk_groups < shape_.num_groups;
  if (limited) {
    picked_groups_.clear();
    for (int32_t i = 0; i < shape_.topk_groups; ++i) {
      const int32_t g = pick_group(rng);
      group_allowed_[g] = 1;
      picked_groups_.push_back(g);
    }
  }
  for (int32_t j = 0; j < shape_.top_k; ++j) {
    int32_t e = -1;
    if (j > 0 && coactivation_prob_ > 0.0 && rng.uniform01() < coactivation_prob_) {
      e = pick_mate(rng, experts_out.first(j));
    }
    if (e < 0) e = pick_expert(rng);
    expert_picked_[e] = 1;
    experts_out[j] = e;
  }
  for (int32_t e : experts_out) expert_picked_[e] = 0;
  if (limited) {
    for (int32_t g : picked_groups_) group_allowed_[g] = 0;
  }
}

}  // namespace moesim::sim
