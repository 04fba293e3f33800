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
  void draw(RngStream& rng, int64_t n, std::span<int64_t> counts_out) const;
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
