#include "sim/workload/value_distribution.h"

#include <cmath>
#include <sstream>

#include "base/check.h"

namespace moesim::sim {
namespace {

constexpr double kDefaultMax = kValueDistributionNoMax;
// Standard normal quantile at 0.99, for the (p50, p99) form of the lognormal.
constexpr double kZ99 = 2.3263478740408408;
// Bounds must keep at least this fraction of the untruncated distribution.
constexpr double kMinKeptMass = 0.01;

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Fraction of the untruncated distribution that a draw inside [min, max] keeps.
double kept_mass(const ValueDistributionSpec& s) {
  // Integer draws are rounded: x in [min - 0.5, max + 0.5) survives.
  const double lo = s.integer ? s.min - 0.5 : s.min;
  const double hi = s.integer ? s.max + 0.5 : s.max;
  if (s.shape == ValueDistributionSpec::Shape::kLognormal) {
    const double cdf_hi = hi <= 0.0 ? 0.0 : normal_cdf((std::log(hi) - s.mu) / s.sigma);
    const double cdf_lo = lo <= 0.0 ? 0.0 : normal_cdf((std::log(lo) - s.mu) / s.sigma);
    return cdf_hi - cdf_lo;
  }
  const double cdf_hi = hi <= 0.0 ? 0.0 : 1.0 - std::exp(-hi / s.mean);
  const double cdf_lo = lo <= 0.0 ? 0.0 : 1.0 - std::exp(-lo / s.mean);
  return cdf_hi - cdf_lo;
}

void check_integral(TomlTable& t, std::string_view key, double v, bool integer) {
  if (integer && v != std::floor(v)) t.fail(key, "value " + fmt(v) + " must be an integer");
}

void parse_bounds(TomlTable& t, ValueDistributionSpec& s, double lowest) {
  s.min = t.get_double_in_or("min", lowest, kDefaultMax, lowest);
  check_integral(t, "min", s.min, s.integer);
  s.max = t.get_double_in_or("max", lowest, kDefaultMax, kDefaultMax);
  check_integral(t, "max", s.max, s.integer);
  if (s.max < s.min) t.fail("max", "max " + fmt(s.max) + " is below min " + fmt(s.min));
  const double kept = kept_mass(s);
  if (kept < kMinKeptMass) {
    t.fail_table("bounds [" + fmt(s.min) + ", " + fmt(s.max) + "] keep only " + fmt(kept * 100.0) +
                 "% of the distribution (need at least 1%)");
  }
}

}  // namespace

ValueDistributionSpec constant_distribution(double value, bool integer) {
  ValueDistributionSpec s;
  s.shape = ValueDistributionSpec::Shape::kConstant;
  s.integer = integer;
  s.value = value;
  s.min = value;
  s.max = value;
  return s;
}

ValueDistributionSpec parse_value_distribution(TomlTable& t, bool integer, double lowest) {
  ValueDistributionSpec s;
  s.integer = integer;
  const std::string shape =
      t.get_enum("distribution", {"constant", "lognormal", "exponential", "empirical"});
  if (shape == "constant") {
    s = constant_distribution(t.get_double_in("value", lowest, kDefaultMax), integer);
    check_integral(t, "value", s.value, integer);
  } else if (shape == "lognormal") {
    s.shape = ValueDistributionSpec::Shape::kLognormal;
    const bool quantile_form = t.has("p50") || t.has("p99");
    const bool moment_form = t.has("mean") || t.has("sigma");
    if (quantile_form && moment_form) {
      t.fail(t.has("p50") ? "p50" : "p99",
             "give either (p50, p99) or (mean, sigma) for a lognormal, not both");
    }
    if (quantile_form) {
      const double p50 = t.get_double_in("p50", 1e-12, kDefaultMax);
      const double p99 = t.get_double_in("p99", 1e-12, kDefaultMax);
      if (p99 <= p50) t.fail("p99", "p99 " + fmt(p99) + " must be greater than p50 " + fmt(p50));
      s.mu = std::log(p50);
      s.sigma = (std::log(p99) - std::log(p50)) / kZ99;
    } else {
      const double mean = t.get_double_in("mean", 1e-12, kDefaultMax);
      s.sigma = t.get_double_in("sigma", 1e-6, 10.0);
      s.mu = std::log(mean) - 0.5 * s.sigma * s.sigma;
    }
    parse_bounds(t, s, lowest);
  } else if (shape == "exponential") {
    s.shape = ValueDistributionSpec::Shape::kExponential;
    s.mean = t.get_double_in("mean", 1e-12, kDefaultMax);
    parse_bounds(t, s, lowest);
  } else {
    s.shape = ValueDistributionSpec::Shape::kEmpirical;
    s.values = t.get_double_array("values");
    if (s.values.empty()) t.fail("values", "needs at least one value");
    for (double v : s.values) {
      if (!(v >= lowest && v <= kDefaultMax)) {
        t.fail("values", "value " + fmt(v) + " is out of range [" + fmt(lowest) + ", " +
                             fmt(kDefaultMax) + "]");
      }
      check_integral(t, "values", v, integer);
    }
    s.weights = t.find_double_array("weights").value_or(std::vector<double>(s.values.size(), 1.0));
    if (s.weights.size() != s.values.size()) {
      t.fail("weights", "has " + std::to_string(s.weights.size()) + " entries but values has " +
                            std::to_string(s.values.size()));
    }
    double sum = 0.0;
    for (double w : s.weights) {
      if (!(w >= 0.0 && std::isfinite(w))) t.fail("weights", "weight " + fmt(w) + " is negative");
      sum += w;
    }
    if (!(sum > 0.0)) t.fail("weights", "weights must have a positive sum");
  }
  t.finish();
  return s;
}

ValueDistribution::ValueDistribution(const ValueDistributionSpec& spec) : spec_(spec) {
  if (spec_.shape == ValueDistributionSpec::Shape::kEmpirical) {
    empirical_ = std::make_unique<CategoricalDistribution>(spec_.weights);
  }
}

double ValueDistribution::sample(RngStream& rng) const {
  using Shape = ValueDistributionSpec::Shape;
  switch (spec_.shape) {
    case Shape::kConstant:
      return spec_.value;
    case Shape::kEmpirical:
      return spec_.values[static_cast<size_t>(empirical_->sample(rng))];
    case Shape::kLognormal:
    case Shape::kExponential:
      break;
  }
  // The parser guarantees that the bounds keep >= 1% of the mass, so this loop ends quickly.
  while (true) {
    double x = spec_.shape == Shape::kLognormal ? lognormal(rng, spec_.mu, spec_.sigma)
                                                : exponential(rng, 1.0 / spec_.mean);
    if (spec_.integer) x = std::round(x);
    if (x >= spec_.min && x <= spec_.max) return x;
  }
}

int64_t ValueDistribution::sample_int(RngStream& rng) const {
  MOESIM_CHECK(spec_.integer, "sample_int on a real-valued distribution");
  return static_cast<int64_t>(sample(rng));
}

}  // namespace moesim::sim
