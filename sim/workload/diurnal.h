// The diurnal shape of a trace's session starts (docs/workload.md, "Diurnal shape"): when a trace
// window spans at least a day, the rate of new sessions in each hour of the day (counted from the
// window's start) relative to the window's mean. replay = "model" then fits its start process on
// the trace's operational time, Lambda(t) = integral_0^t f (the hourly factor f, mean 1 over a
// day), so that the daily swing is not mistaken for burstiness, and maps the generated starts
// back with Lambda^-1: a time change of the stationary process, which keeps its mean rate and
// gives hour h the rate f_h x the mean. A window shorter than a day has no shape (empty).
#pragma once

#include <array>
#include <vector>

#include "sim/core/time.h"

namespace moesim::sim {

inline constexpr SimTime kNsPerHour = SimTime{3600} * kNsPerS;
inline constexpr SimTime kNsPerDay = 24 * kNsPerHour;

struct DiurnalShape {
  // Empty, or 24 hourly rate factors (>= 0, mean 1): hour h of each day from the window's start.
  std::vector<double> factors;

  bool empty() const { return factors.empty(); }
  // Lambda(real_ns): the operational time of a real time (any sign; periodic by the day).
  double operational_ns(SimTime real_ns) const;
  // Lambda^-1: the real time of an operational time, rounded to the ns; hours with a zero factor
  // are skipped (nothing starts in them).
  SimTime real_ns(double operational_ns) const;
};

// The shape of session starts at `start_offsets_ns` (from the window's start, in [0, period_ns))
// over a window of `period_ns`: empty when period_ns is under a day or nothing starts; else each
// hour's starts per ns of the window it covers, over the window's mean, scaled to mean 1.
DiurnalShape fit_diurnal_shape(const std::vector<SimTime>& start_offsets_ns, SimTime period_ns);

}  // namespace moesim::sim
