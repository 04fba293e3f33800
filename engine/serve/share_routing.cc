#include "engine/serve/share_routing.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "base/check.h"
#include "engine/synthetic.h"

namespace moesim::engine::serve {

namespace {

// Uniform on (0, 1) from 53 random bits (never 0, so log() is finite).
double open_unit(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace

uint64_t routing_seed(uint64_t root_seed, int64_t step_idx, int64_t layer_idx) {
  return splitmix64(splitmix64(root_seed ^ 0x726f7574696e67ull) +
                    static_cast<uint64_t>(step_idx) * 0x9e3779b97f4a7c15ull +
                    static_cast<uint64_t>(layer_idx));
}

std::vector<RoutingEntry> sample_share_routing(const std::vector<double>& share, int64_t top_k,
                                               const TokensPerGpu& tokens_per_gpu,
                                               const TracePlacement& placement,
                                               const std::vector<int32_t>& replica_gpus,
                                               uint64_t seed) {
  const int64_t num_experts = static_cast<int64_t>(share.size());
  MOESIM_CHECK(top_k >= 1 && top_k <= num_experts, "share routing: top_k in [1, experts]");
  MOESIM_CHECK(static_cast<int64_t>(placement.expert_gpus.size()) == num_experts,
               "share routing: placement and shares disagree on the expert count");
  // Each expert's GPUs within the replica.
  std::vector<std::vector<int32_t>> holders(num_experts);
  for (int64_t e = 0; e < num_experts; ++e) {
    for (int32_t g : placement.expert_gpus[e]) {
      if (std::find(replica_gpus.begin(), replica_gpus.end(), g) != replica_gpus.end()) {
        holders[e].push_back(g);
      }
    }
    MOESIM_CHECK(!holders[e].empty(), "share routing: an expert with no GPU in the replica");
  }
  std::map<std::tuple<int32_t, int32_t, int32_t>, int64_t> counts;
  uint64_t state = seed;
  std::vector<std::pair<double, int32_t>> keys(num_experts);
  std::vector<int64_t> next_holder(num_experts, 0);
  for (const auto& [src, tokens] : tokens_per_gpu) {
    for (int64_t t = 0; t < tokens; ++t) {
      // Efraimidis-Spirakis: key = log(u) / w; the top_k largest keys are the sample.
      for (int64_t e = 0; e < num_experts; ++e) {
        state = splitmix64(state);
        const double key = share[e] > 0 ? std::log(open_unit(state)) / share[e] : -INFINITY;
        keys[e] = {key, static_cast<int32_t>(e)};
      }
      std::partial_sort(keys.begin(), keys.begin() + top_k, keys.end(),
                        [](const auto& a, const auto& b) {
                          return a.first != b.first ? a.first > b.first : a.second < b.second;
                        });
      for (int64_t j = 0; j < top_k; ++j) {
        const int32_t e = keys[j].second;
        MOESIM_CHECK(keys[j].first > -INFINITY,
                     "share routing: fewer than top_k experts with a share");
        const std::vector<int32_t>& h = holders[e];
        int32_t dst = h[next_holder[e] % static_cast<int64_t>(h.size())];
        if (std::find(h.begin(), h.end(), src) != h.end()) {
          dst = src;
        } else {
          ++next_holder[e];
        }
        ++counts[{src, e, dst}];
      }
    }
  }
  std::vector<RoutingEntry> out;
  out.reserve(counts.size());
  for (const auto& [key, count] : counts) {
    out.push_back(RoutingEntry{std::get<0>(key), std::get<1>(key), std::get<2>(key), count});
  }
  return out;
}

}  // namespace moesim::engine::serve
