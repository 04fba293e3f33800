#include "sim/core/horizon.h"

#include <cmath>
#include <cstdio>

#include "base/check.h"

namespace moesim::sim {

std::string format_number(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", value);
  return buf;
}

void throw_bad_duration(std::string_view what, double seconds, std::string_view hint) {
  std::string msg(what);
  if (std::isnan(seconds)) {
    msg += " is not a number";
  } else if (seconds < 0) {
    msg += " takes " + format_number(seconds) + " s, a negative duration";
  } else {
    msg += " takes " + format_number(seconds) + " s, beyond the 100-year horizon (" +
           format_number(kHorizonS) + " s)";
  }
  if (!hint.empty()) {
    msg += ": ";
    msg += hint;
  }
  throw HorizonError(std::move(msg));
}

SimTime add_within_horizon(SimTime a, SimTime b, std::string_view what) {
  MOESIM_CHECK(a >= 0 && a <= kHorizonNs && b >= 0 && b <= kHorizonNs,
               "add_within_horizon: operands outside [0, horizon]");
  const SimTime sum = a + b;  // <= 2 x horizon: no overflow
  if (sum > kHorizonNs) throw_bad_duration(what, to_seconds(sum), "");
  return sum;
}

}  // namespace moesim::sim
