// The simulation horizon: the longest duration a model may compute and the latest time an event
// may be scheduled at, 100 Julian years (3.15576e9 s). Durations are computed in double seconds
// and become SimTime (int64 ns) once; past about 292 years that would wrap into a negative or
// tiny duration, a run that looks faster than the baseline. So every duration computed from
// inputs goes through checked_duration_ns() (or an equivalent check), the kernel refuses events
// past the horizon, and past it is bad input (HorizonError, a ConfigError naming what was
// computed and which inputs to check). 100 years is under half of int64 nanoseconds, so now + a
// checked duration never overflows. docs/reliability.md ("Durations and the horizon").
#pragma once

#include <string>
#include <string_view>

#include "sim/core/config_error.h"
#include "sim/core/time.h"

namespace moesim::sim {

// 100 Julian years of 365.25 days.
inline constexpr double kHorizonS = 100.0 * 365.25 * 24 * 3600;
inline constexpr SimTime kHorizonNs = SimTime{36525} * 24 * 3600 * kNsPerS;  // 36,525 days
static_assert(kHorizonNs == 3'155'760'000'000'000'000);
static_assert(static_cast<double>(kHorizonNs) == kHorizonS * 1e9);
// Two times within the horizon add without overflow.
static_assert(kHorizonNs <= kSimTimeMax / 2);

// A duration or time computed from inputs that is negative, not a number, or beyond the horizon.
class HorizonError : public ConfigError {
 public:
  explicit HorizonError(std::string message) : ConfigError(NoLocation{}, std::move(message)) {}
};

// True when `seconds` lies in [0, kHorizonS] (false for NaN).
inline bool within_horizon_s(double seconds) { return seconds >= 0.0 && seconds <= kHorizonS; }

// Throws HorizonError "<what> takes <seconds> s, beyond the 100-year horizon (3.156e+09 s)[:
// <hint>]" (or "... is negative" / "... is not a number"). `what` names the computation
// ("network: an all-to-all ..."), `hint` the inputs to check.
[[noreturn]] void throw_bad_duration(std::string_view what, double seconds, std::string_view hint);

// `seconds` rounded to nanoseconds as from_seconds() does, when it lies in [0, kHorizonS];
// otherwise throws HorizonError (throw_bad_duration). One comparison on the normal path.
inline SimTime checked_duration_ns(double seconds, std::string_view what,
                                   std::string_view hint = {}) {
  if (!within_horizon_s(seconds)) [[unlikely]] {
    throw_bad_duration(what, seconds, hint);
  }
  return from_seconds(seconds);
}

// a + b for a, b in [0, kHorizonNs]; a HorizonError naming `what` when the sum passes the horizon.
SimTime add_within_horizon(SimTime a, SimTime b, std::string_view what);

// A number with 4 significant digits ("1.2e+297", "0.03125"), for messages.
std::string format_number(double value);

}  // namespace moesim::sim
