#include "sim/routing/count_draws.h"

#include "sim/core/distributions.h"

namespace moesim::sim {

void capped_multinomial(RngStream& rng, int64_t num_tokens, int32_t top_k,
                        std::span<const double> pi, std::vector<int64_t>& counts,
                        CappedMultinomialScratch& scratch) {
  const size_t num_experts = pi.size();
  counts.resize(num_experts);
  scratch.extra.resize(num_experts);
  scratch.probs.resize(num_experts);
  multinomial(rng, num_tokens * top_k, pi, counts);
  while (true) {
    int64_t excess = 0;
    for (int64_t& c : counts) {
      if (c > num_tokens) {
        excess += c - num_tokens;
        c = num_tokens;
      }
    }
    if (excess == 0) break;
    double open_weight = 0.0;
    for (size_t e = 0; e < num_experts; ++e) {
      scratch.probs[e] = counts[e] < num_tokens ? pi[e] : 0.0;
      open_weight += scratch.probs[e];
    }
    if (!(open_weight > 0.0)) {
      for (size_t e = 0; e < num_experts; ++e) {
        scratch.probs[e] = counts[e] < num_tokens ? 1.0 : 0.0;
      }
    }
    multinomial(rng, excess, scratch.probs, scratch.extra);
    for (size_t e = 0; e < num_experts; ++e) counts[e] += scratch.extra[e];
  }
}

}  // namespace moesim::sim
