// A one-dimensional distribution of token counts, turn counts or delays, configured by a TOML
// table with a `distribution` key (constant, lognormal, exponential, empirical) and optional
// inclusive bounds. Truncation is by rejection (redraw until inside [min, max]), so the bounds
// shape the distribution instead of piling mass on them; bounds keeping less than 1% of the mass
// are refused. Integer-valued draws are rounded before the bounds are checked. The keys and
// defaults: docs/workload.md, "Distribution tables".
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/config/toml_source.h"
#include "sim/core/distributions.h"
#include "sim/core/rng.h"

namespace moesim::sim {

// The default (and largest) `max`: no explicit upper bound.
inline constexpr double kValueDistributionNoMax = 1e15;

struct ValueDistributionSpec {
  enum class Shape { kConstant, kLognormal, kExponential, kEmpirical };
  Shape shape = Shape::kConstant;
  bool integer = true;
  // kConstant: the value.
  double value = 0.0;
  // kLognormal: parameters of the underlying normal (mean = exp(mu + sigma^2 / 2)).
  double mu = 0.0;
  double sigma = 0.0;
  // kExponential: the mean.
  double mean = 0.0;
  // kEmpirical: values and their non-negative weights (same size, positive sum).
  std::vector<double> values;
  std::vector<double> weights;
  // Inclusive truncation bounds for kLognormal and kExponential.
  double min = 0.0;
  double max = 0.0;
};

// Parses a distribution table (and calls t.finish()). `integer` makes values integral;
// `lowest` is the smallest value allowed (e.g. 1 for prompt tokens, 0 for reasoning tokens),
// which is also the default `min`; `max` defaults to kValueDistributionNoMax.
ValueDistributionSpec parse_value_distribution(TomlTable& t, bool integer, double lowest);

// The same constant as a spec (for tests and defaults).
ValueDistributionSpec constant_distribution(double value, bool integer);

class ValueDistribution {
 public:
  explicit ValueDistribution(const ValueDistributionSpec& spec);

  // One draw. Integer specs return integral values.
  double sample(RngStream& rng) const;
  // One draw of an integer spec. Precondition (checked): spec.integer.
  int64_t sample_int(RngStream& rng) const;
  const ValueDistributionSpec& spec() const { return spec_; }

 private:
  ValueDistributionSpec spec_;
  std::unique_ptr<CategoricalDistribution> empirical_;
};

}  // namespace moesim::sim
