// Simulated time: int64 nanoseconds since the start of a run. Durations are computed in
// double seconds by models and rounded to nanoseconds exactly once, by from_seconds().
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace moesim::sim {

// Simulated time or duration in nanoseconds.
using SimTime = int64_t;

inline constexpr SimTime kNsPerUs = 1'000;
inline constexpr SimTime kNsPerMs = 1'000'000;
inline constexpr SimTime kNsPerS = 1'000'000'000;
inline constexpr SimTime kSimTimeMax = std::numeric_limits<SimTime>::max();

// Rounds a duration in seconds to the nearest nanosecond (half away from zero).
// Precondition: finite and within +-9.2e9 s.
inline SimTime from_seconds(double seconds) {
  return static_cast<SimTime>(std::llround(seconds * static_cast<double>(kNsPerS)));
}
inline double to_seconds(SimTime t) {
  return static_cast<double>(t) / static_cast<double>(kNsPerS);
}
inline double to_ms(SimTime t) { return static_cast<double>(t) / static_cast<double>(kNsPerMs); }
inline double to_us(SimTime t) { return static_cast<double>(t) / static_cast<double>(kNsPerUs); }

}  // namespace moesim::sim
