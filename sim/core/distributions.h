// Distributions implemented in the project (the standard library's differ between
// implementations, which would break bit-identical digests across machines).
// All functions take the stream to draw from; none keeps hidden state between calls.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/rng.h"

namespace moesim::sim {

// Uniform in [lo, hi). Precondition: lo <= hi.
double uniform(RngStream& rng, double lo, double hi);
// Exponential with the given rate (mean 1 / rate). Precondition: rate > 0.
double exponential(RngStream& rng, double rate);
// Normal with mean and standard deviation (Marsaglia polar method, second value discarded).
double normal(RngStream& rng, double mean, double stddev);
// exp(Normal(mu, sigma)).
double lognormal(RngStream& rng, double mu, double sigma);
// Gamma with shape k > 0 and scale theta > 0 (Marsaglia-Tsang; shape < 1 by boosting).
double gamma(RngStream& rng, double shape, double scale);
// Poisson with the given mean >= 0 (inversion for small means, PTRS for mean >= 10).
int64_t poisson(RngStream& rng, double mean);
// Binomial(n, p): n >= 0, 0 <= p <= 1 (inversion for small n*p, BTRS otherwise).
int64_t binomial(RngStream& rng, int64_t n, double p);
// A Dirichlet draw with the given concentrations (all > 0); the result sums to 1.
std::vector<double> dirichlet(RngStream& rng, std::span<const double> alphas);
// Multinomial: distributes n trials over categories with probabilities `probs` (non-negative,
// need not be normalised, positive sum) by conditional binomials; writes counts_out (same size
// as probs), which sums to n.
void multinomial(RngStream& rng, int64_t n, std::span<const double> probs,
                 std::span<int64_t> counts_out);

// multinomial() for one probability vector drawn from many times: the conditional
// probabilities and their logarithms are computed once. draw() gives the same counts from the
// same stream as multinomial() with the vector given here.
class PreparedMultinomial {
 public:
  PreparedMultinomial() = default;
  explicit PreparedMultinomial(std::span<const double> probs);
  // The first `num_prepared` categories of probs' multinomial only (their conditional
  // probabilities are those of every category's): for draw_prefix() of at most that many; size()
  // is num_prepared.
  PreparedMultinomial(std::span<const double> probs, size_t num_prepared);
  void draw(RngStream& rng, int64_t n, std::span<int64_t> counts_out) const;
  // draw()'s first `num_drawn` categories only (counts_out[0, num_drawn)); returns the trials
  // left for the others. draw() is draw_prefix() over every category.
  int64_t draw_prefix(RngStream& rng, int64_t n, size_t num_drawn,
                      std::span<int64_t> counts_out) const;
  size_t size() const { return categories_.size(); }

 private:
  // kNone: no trial lands here; kAll: every remaining trial does; kDirect: Binomial(remaining,
  // p); kComplement: remaining - Binomial(remaining, p), p being 1 - the conditional probability.
  enum class Kind : uint8_t { kNone, kAll, kDirect, kComplement };
  struct Category {
    Kind kind = Kind::kNone;
    double p = 0;             // <= 0.5
    double log1p_neg_p = 0;   // log1p(-p)
    double log_p_over_q = 0;  // log(p / (1 - p))
  };
  std::vector<Category> categories_;
};

// Multinomial(n, probs) drawn on its likeliest categories only (the fast fidelity's destination
// loads, docs/fast_fidelity.md, "Candidate draw"). Categories are ordered by decreasing probability
// (ties: lower index first). The first K, the candidates, are drawn exactly: conditional
// binomials in that order, so their joint law is the multinomial's. The trials left are spread
// over the other categories in proportion to their probabilities by cumulative rounding (their
// conditional expectation, in whole trials; the counts sum to n). K is the fewest categories
// such that, by Bernstein's inequality and a union bound, the chance that any other category
// would have drawn at least as many trials as the likeliest one is at most `epsilon`:
//   n h_j >= ln(m / epsilon) for every non-candidate j (m categories),
//   h_j = d^2 / (2 (p_0 + p_j - d^2 + (1 + d) d / 3)),  d = p_0 - p_j
// (p normalised; the increments 1[trial lands on j] - 1[trial lands on 0] have mean -d, variance
// p_0 + p_j - d^2 and deviate from their mean by at most 1 + d).
class CandidateMultinomial {
 public:
  // probs: non-negative, positive sum.
  explicit CandidateMultinomial(std::span<const double> probs);
  // The candidates for n trials at `epsilon` in (0, 1): m when none can be bounded away.
  size_t num_candidates(int64_t n, double epsilon) const;
  // One draw with `num_candidates` candidates (>= 1, <= m) into counts_out (m entries, in the
  // given categories' order).
  // Not const: the binomials of candidates beyond the first kPreparedFirst are prepared on first
  // need.
  void draw(RngStream& rng, int64_t n, size_t num_candidates, std::span<int64_t> counts_out);
  size_t size() const { return order_.size(); }

 private:
  static constexpr size_t kPreparedFirst = 8;
  std::vector<size_t> order_;     // categories by decreasing probability
  std::vector<double> p_;         // the probabilities in that order
  std::vector<double> suffix_;    // suffix sums of the ordered probabilities (m + 1 entries)
  std::vector<double> min_rate_;  // suffix minima of h_j over ordered positions (m + 1; +inf)
  PreparedMultinomial ordered_;   // the multinomial over p_ (its first kPreparedFirst or all)
  // With k <= kKeptShares candidates, draw()'s cumulative share of position j among the others:
  // shares_[(k - 1) * m + j].
  static constexpr size_t kKeptShares = 4;
  std::vector<double> shares_;
  // num_candidates()'s log(m / epsilon) for the last epsilon asked (one object per thread, as
  // draw()'s preparation).
  mutable double needed_epsilon_ = 0, needed_ = 0;
};

// Categorical over indices 0..n-1 with the given non-negative weights (positive sum), sampled in
// O(1) by Vose's alias method.
class CategoricalDistribution {
 public:
  explicit CategoricalDistribution(std::span<const double> weights);
  int64_t sample(RngStream& rng) const;
  size_t size() const { return prob_.size(); }
  // Normalised probability of index i.
  double probability(size_t i) const { return normalized_[i]; }

 private:
  std::vector<double> prob_;
  std::vector<int64_t> alias_;
  std::vector<double> normalized_;
};

// Zipf over ranks 0..n-1: P(k) proportional to 1 / (k + 1)^s, s >= 0.
class ZipfDistribution {
 public:
  ZipfDistribution(int64_t n, double s);
  int64_t sample(RngStream& rng) const;
  double probability(int64_t k) const;
  int64_t size() const { return n_; }

 private:
  int64_t n_;
  double s_;
  CategoricalDistribution table_;
};

}  // namespace moesim::sim
