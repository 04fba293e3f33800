#include "sim/workload/arrival_process.h"

#include "sim/core/distributions.h"
#include "sim/core/horizon.h"

namespace moesim::sim {

ArrivalSpec parse_arrival(TomlTable& t) {
  ArrivalSpec s;
  const std::string process = t.get_enum_or("process", {"poisson", "gamma"}, "poisson");
  s.rate_per_s = t.get_double_in("rate_per_s", 1e-9, 1e9);
  if (process == "gamma") {
    s.process = ArrivalSpec::Process::kGamma;
    s.cv = t.get_double_in("cv", 0.01, 100.0);
  }
  t.finish();
  return s;
}

std::optional<SimTime> ArrivalProcess::next_arrival_ns(RngStream& rng) {
  if (last_ns_ > kHorizonNs) return std::nullopt;
  double gap_s = 0.0;
  if (spec_.process == ArrivalSpec::Process::kPoisson) {
    gap_s = exponential(rng, spec_.rate_per_s);
  } else {
    const double shape = 1.0 / (spec_.cv * spec_.cv);
    gap_s = gamma(rng, shape, 1.0 / (spec_.rate_per_s * shape));
  }
  // last_ns_ and the gap are within the horizon, so the sum does not overflow.
  last_ns_ = within_horizon_s(gap_s) ? last_ns_ + from_seconds(gap_s) : kHorizonNs + 1;
  if (last_ns_ > kHorizonNs) return std::nullopt;
  return last_ns_;
}

}  // namespace moesim::sim
