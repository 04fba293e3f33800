#include "engine/permutation.h"

#include <algorithm>
#include <map>

#include "base/check.h"

namespace moesim::engine {

ForcedRouting assign_forced_routing(int64_t num_tokens, int64_t top_k,
                                    std::vector<ExpertSelectionCount> counts) {
  std::sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
    return a.expert != b.expert ? a.expert < b.expert : a.dst_gpu < b.dst_gpu;
  });
  ForcedRouting routing;
  routing.num_tokens = num_tokens;
  routing.top_k = top_k;
  routing.expert_ids.assign(num_tokens * top_k, -1);
  routing.dst_gpus.assign(num_tokens * top_k, -1);
  std::map<int32_t, int64_t> per_expert;
  int64_t j = 0;
  for (const ExpertSelectionCount& c : counts) {
    MOESIM_CHECK(c.count >= 0, "forced routing: negative count");
    per_expert[c.expert] += c.count;
    MOESIM_CHECK(per_expert[c.expert] <= num_tokens,
                 "forced routing: an expert is chosen more often than there are tokens");
    for (int64_t i = 0; i < c.count; ++i, ++j) {
      MOESIM_CHECK(j < num_tokens * top_k, "forced routing: too many selections");
      const int64_t slot = (j % num_tokens) * top_k + j / num_tokens;
      routing.expert_ids[slot] = c.expert;
      routing.dst_gpus[slot] = c.dst_gpu;
    }
  }
  MOESIM_CHECK(j == num_tokens * top_k, "forced routing: too few selections");
  return routing;
}

Permutation make_permutation(const std::vector<int32_t>& expert_ids, int64_t top_k,
                             int64_t num_experts) {
  const int64_t num_slots = static_cast<int64_t>(expert_ids.size());
  MOESIM_CHECK(top_k >= 1 && num_slots % top_k == 0, "permutation: slots per token");
  Permutation p;
  p.tokens_per_expert.assign(num_experts, 0);
  for (int32_t e : expert_ids) {
    MOESIM_CHECK(e >= 0 && e < num_experts, "permutation: expert id out of range");
    ++p.tokens_per_expert[e];
  }
  std::vector<int64_t> next_row(num_experts, 0);
  for (int64_t e = 1; e < num_experts; ++e) {
    next_row[e] = next_row[e - 1] + p.tokens_per_expert[e - 1];
  }
  p.gather_rows.resize(num_slots);
  p.scatter_rows.resize(num_slots);
  for (int64_t slot = 0; slot < num_slots; ++slot) {
    const int64_t row = next_row[expert_ids[slot]]++;
    p.gather_rows[row] = static_cast<int32_t>(slot / top_k);
    p.scatter_rows[row] = static_cast<int32_t>(slot);
  }
  return p;
}

}  // namespace moesim::engine
