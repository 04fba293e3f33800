// Internal to sim/routing: the count draws of SyntheticRoutingModel that are plain functions of a
// stream and shares. A capped multinomial gives n tokens' top-k selections over experts with no
// expert above n (a token picks an expert at most once); systematic rounding spreads a known
// number of selections over shares with one uniform, so a row's total is exact.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/rng.h"

namespace moesim::sim {

// Reused buffers of capped_multinomial() (no allocation per call once grown).
struct CappedMultinomialScratch {
  std::vector<int64_t> extra;
  std::vector<double> probs;
};

// Multinomial(num_tokens * top_k, pi) into `counts` (resized to pi.size()), no entry above
// num_tokens: the excess over num_tokens is drawn again over the experts still below it (in
// proportion to pi, or uniformly when those have no share) until none exceeds. Requires
// num_tokens * top_k <= num_tokens * pi.size() (room for every selection).
void capped_multinomial(RngStream& rng, int64_t num_tokens, int32_t top_k,
                        std::span<const double> pi, std::vector<int64_t>& counts,
                        CappedMultinomialScratch& scratch);

// Adds num_selections to `row` (one cell per share) by systematic rounding: cell d gets
// floor(u + cum_d) - floor(u + cum_{d-1}), cum_d the running sum of num_selections * shares, u
// one uniform; the last cell with a positive share takes any remainder, so the cells added sum
// to num_selections exactly. Shares sum to 1; cells with share <= 0 get nothing.
// Inline: called once per source and share row on the hot path.
inline void systematic_add(RngStream& rng, int64_t num_selections, std::span<const double> shares,
                           std::span<int32_t> row) {
  const double total = static_cast<double>(num_selections);
  double cum = rng.uniform01();
  int64_t assigned = 0;
  size_t last = 0;
  // cum >= 0, so truncation is floor (without the libm call).
  for (size_t d = 0; d < shares.size(); ++d) {
    if (shares[d] <= 0.0) continue;
    last = d;
    cum += total * shares[d];
    const auto upto = std::min<int64_t>(num_selections, static_cast<int64_t>(cum));
    row[d] += static_cast<int32_t>(upto - assigned);
    assigned = upto;
  }
  row[last] += static_cast<int32_t>(num_selections - assigned);
}

}  // namespace moesim::sim
