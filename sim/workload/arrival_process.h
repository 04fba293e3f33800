// Open-loop arrival processes: inter-arrival gaps of requests (or agent sessions).
//   poisson: exponential gaps with mean 1 / rate_per_s (coefficient of variation 1);
//   gamma:   gamma gaps with the same mean and a chosen coefficient of variation cv
//            (shape 1 / cv^2): cv > 1 is burstier than Poisson, cv < 1 smoother.
#pragma once

#include <optional>

#include "sim/config/toml_source.h"
#include "sim/core/rng.h"
#include "sim/core/time.h"

namespace moesim::sim {

struct ArrivalSpec {
  enum class Process { kPoisson, kGamma };
  Process process = Process::kPoisson;
  // Mean arrival rate, > 0.
  double rate_per_s = 1.0;
  // Coefficient of variation of the gaps (stddev / mean), > 0; 1 for Poisson.
  double cv = 1.0;
};

// Parses an [arrival] table: process ("poisson" | "gamma", default "poisson"), rate_per_s
// (required, > 0), cv (gamma only, required, in [0.01, 100]). Calls t.finish().
ArrivalSpec parse_arrival(TomlTable& t);

// Draws successive arrival times, starting from time 0. Each gap is drawn in double seconds and
// rounded to nanoseconds once; arrival times are the running sum of the rounded gaps.
class ArrivalProcess {
 public:
  explicit ArrivalProcess(const ArrivalSpec& spec) : spec_(spec) {}
  // The next arrival time (non-decreasing across calls). The first arrival is one gap after 0.
  // std::nullopt once an arrival would fall past the horizon (sim/core/horizon.h; a gap of a
  // century at rate_per_s = 1e-9): the stream ends there, exactly as a run sees it, since no run
  // reaches the horizon (run.duration_s <= 1e7 s). Every later call returns std::nullopt too.
  std::optional<SimTime> next_arrival_ns(RngStream& rng);

 private:
  ArrivalSpec spec_;
  SimTime last_ns_ = 0;
};

}  // namespace moesim::sim
