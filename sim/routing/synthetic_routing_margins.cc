// The margins pass of SyntheticRoutingModel (SamplingMode::kMargins, and kAuto's sources above
// the per-token threshold): one draw of the layer's totals per share row, split over the sources
// by systematic rounding; and those totals alone (draw_totals), drawn exactly as the pass draws
// them, for the fast fidelity. The two walk the stream alike and are kept side by side.
#include <algorithm>

#include "sim/core/distributions.h"
#include "sim/routing/count_draws.h"
#include "sim/routing/synthetic_routing.h"

namespace moesim::sim {

void SyntheticRoutingModel::draw_row_totals(RngStream& rng, int64_t num_tokens,
                                            std::span<const double> shares, bool cap_per_column,
                                            const PreparedMultinomial* prepared) {
  if (cap_per_column) {
    capped_multinomial(rng, num_tokens, shape_.top_k, shares, counts_scratch_, capped_scratch_);
  } else {
    draw_multinomial(rng, num_tokens * shape_.top_k, shares, prepared);
  }
}

void SyntheticRoutingModel::margins_pass(RngStream& rng, const RoutingQuery& query,
                                         int32_t num_rows, std::span<const double> shares,
                                         bool cap_per_column,
                                         std::span<const PreparedMultinomial> prepared,
                                         CountMatrix& out) {
  // Row r of `shares` (num_rows x num_cols) is the domain mix (num_rows == 1, no split) or
  // domain r.
  const int32_t num_cols = out.num_cols();
  const auto num_src = static_cast<int32_t>(query.tokens_per_src.size());
  const bool split = !query.tokens_per_src_domain.empty();
  for (int32_t r = 0; r < num_rows; ++r) {
    auto tokens_of = [&](int32_t s) -> int64_t {
      return split ? query.tokens_per_src_domain[static_cast<size_t>(s) * num_rows + r]
                   : query.tokens_per_src[s];
    };
    int64_t num_tokens = 0;
    for (int32_t s = 0; s < num_src; ++s) {
      if (margins_for(query.tokens_per_src[s])) num_tokens += tokens_of(s);
    }
    if (num_tokens == 0) continue;
    const std::span<const double> row_shares =
        shares.subspan(static_cast<size_t>(r) * num_cols, num_cols);
    draw_row_totals(rng, num_tokens, row_shares, cap_per_column,
                    prepared.empty() ? nullptr : &prepared[r]);
    column_shares_.resize(num_cols);
    const double total = static_cast<double>(num_tokens * shape_.top_k);
    for (int32_t c = 0; c < num_cols; ++c) {
      column_shares_[c] = static_cast<double>(counts_scratch_[c]) / total;
    }
    for (int32_t s = 0; s < num_src; ++s) {
      if (!margins_for(query.tokens_per_src[s])) continue;
      const int64_t n = tokens_of(s);
      if (n > 0) systematic_add(rng, n * shape_.top_k, column_shares_, out.row(s));
    }
  }
}

void SyntheticRoutingModel::draw_totals(RngStream& rng, const RoutingQuery& query, int32_t num_rows,
                                        std::span<const double> shares, bool cap_per_column,
                                        std::span<const PreparedMultinomial> prepared,
                                        std::vector<int64_t>& totals) {
  const auto num_cols = static_cast<int32_t>(shares.size() / num_rows);
  totals.assign(num_cols, 0);
  const auto num_src = static_cast<int32_t>(query.tokens_per_src.size());
  const bool split = !query.tokens_per_src_domain.empty();
  for (int32_t r = 0; r < num_rows; ++r) {
    int64_t num_tokens = 0;
    int32_t num_splits = 0;  // the margins pass's systematic_add calls for this row
    for (int32_t s = 0; s < num_src; ++s) {
      const int64_t n = split ? query.tokens_per_src_domain[static_cast<size_t>(s) * num_rows + r]
                              : query.tokens_per_src[s];
      num_tokens += n;
      num_splits += static_cast<int32_t>(n > 0);
    }
    if (num_tokens == 0) continue;
    const std::span<const double> row_shares =
        shares.subspan(static_cast<size_t>(r) * num_cols, num_cols);
    draw_row_totals(rng, num_tokens, row_shares, cap_per_column,
                    prepared.empty() ? nullptr : &prepared[r]);
    for (int32_t c = 0; c < num_cols; ++c) totals[c] += counts_scratch_[c];
    // Keep the stream where the margins pass has it for the next row's totals (one uniform per
    // source split).
    if (r + 1 < num_rows) {
      for (int32_t k = 0; k < num_splits; ++k) rng.uniform01();
    }
  }
}

}  // namespace moesim::sim
