// Count draws (sim/routing/count_draws.h): the capped multinomial keeps every selection and never
// gives an expert more selections than tokens, and equals the plain multinomial on the same
// stream when the cap does not bind; systematic rounding adds exactly its total, within one of
// the expected count per cell.
#include "sim/routing/count_draws.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "sim/core/distributions.h"

namespace moesim::sim {
namespace {

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), 0LL); }

TEST(CappedMultinomial, KeepsEverySelectionAndCapsEachExpertAtTheTokens) {
  // One expert holds 90% of the shares: uncapped it would get ~3.6 selections per token.
  const std::vector<double> pi = {3.6, 0.1, 0.1, 0.1, 0.1};  // top_k = 4
  CappedMultinomialScratch scratch;
  std::vector<int64_t> counts;
  RngStream rng(7, "capped");
  for (int64_t n : {1, 3, 50, 1000}) {
    capped_multinomial(rng, n, 4, pi, counts, scratch);
    ASSERT_EQ(counts.size(), pi.size());
    EXPECT_EQ(sum(counts), n * 4) << n;
    for (int64_t c : counts) EXPECT_LE(c, n) << n;
    EXPECT_EQ(counts[0], n) << n;  // the hot expert is capped
  }
}

TEST(CappedMultinomial, SpreadsTheExcessUniformlyWhenOpenExpertsHaveNoShare) {
  // Two experts with shares, top_k 3: the third selection must go to an expert without share.
  const std::vector<double> pi = {1.5, 1.5, 0.0, 0.0};
  CappedMultinomialScratch scratch;
  std::vector<int64_t> counts;
  RngStream rng(3, "capped.zero");
  capped_multinomial(rng, 10, 3, pi, counts, scratch);
  EXPECT_EQ(counts[0], 10);
  EXPECT_EQ(counts[1], 10);
  EXPECT_EQ(counts[2] + counts[3], 10);
}

TEST(CappedMultinomial, EqualsThePlainMultinomialWhenTheCapDoesNotBind) {
  const std::vector<double> pi = {0.5, 0.5, 0.5, 0.5};  // top_k 2 over 4 experts
  CappedMultinomialScratch scratch;
  std::vector<int64_t> capped, plain(pi.size());
  RngStream a(11, "same"), b(11, "same");
  capped_multinomial(a, 1000, 2, pi, capped, scratch);
  multinomial(b, 2000, pi, plain);
  EXPECT_EQ(capped, plain);
  EXPECT_EQ(a.next_u64(), b.next_u64());  // and leaves the stream at the same place
}

TEST(SystematicAdd, AddsExactlyItsTotalWithinOneOfTheExpectation) {
  const std::vector<double> shares = {0.1, 0.0, 0.25, 0.3333333333333333, 0.3166666666666667};
  RngStream rng(5, "systematic");
  for (int64_t total : {0, 1, 7, 1000, 123457}) {
    std::vector<int32_t> row(shares.size(), 2);  // adds to what is there
    systematic_add(rng, total, shares, row);
    int64_t added = 0;
    for (size_t d = 0; d < row.size(); ++d) {
      const int64_t got = row[d] - 2;
      added += got;
      EXPECT_LE(std::abs(static_cast<double>(got) - total * shares[d]), 1.0) << total << " " << d;
    }
    EXPECT_EQ(added, total);
    EXPECT_EQ(row[1], 2);  // no share, nothing added
  }
}

}  // namespace
}  // namespace moesim::sim
