#include "sim/network/traffic_plan.h"

#include <algorithm>

#include "base/check.h"
#include "sim/network/hierarchical_traffic.h"

namespace moesim::sim {

void TrafficPlan::build(const Topology& topology, const TokenCounts& counts,
                        DispatchAlgorithm algorithm) {
  check_token_counts(counts, topology);
  gpus_.assign(counts.gpus.begin(), counts.gpus.end());
  algorithm_ = algorithm;
  const size_t p = counts.gpus.size();
  num_additions_ = 0;
  if (algorithm != DispatchAlgorithm::kHierarchical) {  // direct or low-latency: per entry
    tokens_.resize(p * p);
    for (size_t i = 0; i < p * p; ++i) tokens_[i] = static_cast<double>(counts.tokens[i]);
    has_support_ = false;
    return;
  }
  // At most one addition per (source, destination) and one relay row per (source, node), and
  // one slot past them that the branch-free recorder may write.
  const size_t max_additions = p * (p + static_cast<size_t>(topology.num_nodes())) + 1;
  if (entry_.size() < max_additions) {
    entry_.resize(max_additions);
    transposed_entry_.resize(max_additions);
    tokens_.resize(max_additions);
  }
  int32_t* entry = entry_.data();
  int32_t* transposed = transposed_entry_.data();
  double* tokens = tokens_.data();
  const auto pi = static_cast<int32_t>(p);
  int64_t k = 0;
  auto record = [&](int32_t from_idx, int32_t to_idx, double n) {
    entry[k] = from_idx * pi + to_idx;
    transposed[k] = to_idx * pi + from_idx;
    tokens[k] = n;
    ++k;
  };
  const bool whole_nodes = hierarchical_internal::whole_consecutive_nodes(topology, counts);
  if (whole_nodes) {
    // Every candidate is written; only kept ones advance.
    hierarchical_internal::whole_node_additions(
        topology, counts, [&](int32_t from_idx, int32_t to_idx, double n, bool keep) {
          entry[k] = from_idx * pi + to_idx;
          transposed[k] = to_idx * pi + from_idx;
          tokens[k] = n;
          k += static_cast<int64_t>(keep);
        });
  } else {
    hierarchical_internal::general_additions(topology, counts, record);
  }
  num_additions_ = k;
  build_support(topology, whole_nodes);
}

void TrafficPlan::build_support(const Topology& topology, bool whole_nodes) {
  has_support_ = whole_nodes;
  if (!whole_nodes) return;
  const int32_t gpn = topology.gpus_per_node();
  if (support_gpus_ == gpus_ && support_gpus_per_node_ == gpn) return;
  const auto p = static_cast<int32_t>(gpus_.size());
  support_begin_.assign(1, 0);
  support_cols_.clear();
  for (int32_t s = 0; s < p; ++s) {
    for (int32_t first = 0; first < p; first += gpn) {
      if (first == s - s % gpn) {
        for (int32_t d = first; d < first + gpn; ++d) support_cols_.push_back(d);
      } else {
        support_cols_.push_back(first + s % gpn);
      }
    }
    support_begin_.push_back(static_cast<int32_t>(support_cols_.size()));
  }
  support_gpus_ = gpus_;
  support_gpus_per_node_ = gpn;
}

template <bool kCombine>
void TrafficPlan::materialise(double bytes_per_token, TrafficMatrix& out) const {
  MOESIM_CHECK(bytes_per_token >= 0, "bytes per token must be non-negative");
  const size_t p = gpus_.size();
  if (algorithm_ != DispatchAlgorithm::kHierarchical) {
    // Every entry is written exactly once.
    out.reset_uninitialized(gpus_);
    double* bytes = out.bytes_.data();
    for (size_t s = 0; s < p; ++s) {
      const double* row = &tokens_[s * p];
      for (size_t d = 0; d < p; ++d) {
        const double b = row[d] > 0 ? row[d] * bytes_per_token : 0.0;
        bytes[kCombine ? d * p + s : s * p + d] = b;
      }
    }
    return;
  }
  out.reset(gpus_);
  double* bytes = out.bytes_.data();
  const int32_t* entry = kCombine ? transposed_entry_.data() : entry_.data();
  const double* tokens = tokens_.data();
  for (int64_t i = 0; i < num_additions_; ++i) bytes[entry[i]] += tokens[i] * bytes_per_token;
  if (has_support_) {
    out.support_begin_ = support_begin_;
    out.support_cols_ = support_cols_;
    out.has_support_ = true;
  }
}

void TrafficPlan::dispatch_traffic(double bytes_per_token, TrafficMatrix& out) const {
  materialise<false>(bytes_per_token, out);
}

void TrafficPlan::combine_traffic(double bytes_per_token, TrafficMatrix& out) const {
  materialise<true>(bytes_per_token, out);
}

}  // namespace moesim::sim
