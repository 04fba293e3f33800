#include "sim/workload/diurnal.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"

namespace moesim::sim {
namespace {

constexpr int kHours = 24;
constexpr double kHourNs = static_cast<double>(kNsPerHour);
constexpr double kDayNs = static_cast<double>(kNsPerDay);

}  // namespace

double DiurnalShape::operational_ns(SimTime real_ns) const {
  if (empty()) return static_cast<double>(real_ns);
  const double t = static_cast<double>(real_ns);
  const double day = std::floor(t / kDayNs);
  const double r = t - day * kDayNs;
  double cum = 0;
  for (int h = 0; h < kHours; ++h) {
    const double end = (h + 1) * kHourNs;
    if (r < end || h == kHours - 1) return day * kDayNs + cum + factors[h] * (r - h * kHourNs);
    cum += factors[h] * kHourNs;
  }
  return day * kDayNs + cum;
}

SimTime DiurnalShape::real_ns(double operational_ns) const {
  if (empty()) return static_cast<SimTime>(std::llround(operational_ns));
  const double day = std::floor(operational_ns / kDayNs);
  const double r = operational_ns - day * kDayNs;
  double cum = 0;
  int last = 0;  // the last hour with a positive factor
  for (int h = 0; h < kHours; ++h) {
    if (factors[h] <= 0) continue;
    last = h;
    const double width = factors[h] * kHourNs;
    if (r < cum + width) {
      return static_cast<SimTime>(
          std::llround(day * kDayNs + h * kHourNs + (r - cum) / factors[h]));
    }
    cum += width;
  }
  // Rounding at the day's end: the end of its last hour with starts.
  return static_cast<SimTime>(std::llround(day * kDayNs + (last + 1) * kHourNs));
}

DiurnalShape fit_diurnal_shape(const std::vector<SimTime>& start_offsets_ns, SimTime period_ns) {
  DiurnalShape shape;
  if (period_ns < kNsPerDay || start_offsets_ns.empty()) return shape;
  std::array<double, kHours> starts{}, exposure_ns{};
  for (SimTime t : start_offsets_ns) {
    MOESIM_CHECK(t >= 0 && t < period_ns, "session start outside the window");
    ++starts[static_cast<size_t>((t % kNsPerDay) / kNsPerHour)];
  }
  const SimTime whole_days = period_ns / kNsPerDay, rest_ns = period_ns % kNsPerDay;
  for (int h = 0; h < kHours; ++h) {
    const SimTime in_rest = std::clamp<SimTime>(rest_ns - h * kNsPerHour, 0, kNsPerHour);
    exposure_ns[h] = static_cast<double>(whole_days * kNsPerHour + in_rest);
  }
  const double mean_rate =
      static_cast<double>(start_offsets_ns.size()) / static_cast<double>(period_ns);
  shape.factors.resize(kHours);
  for (int h = 0; h < kHours; ++h) shape.factors[h] = starts[h] / exposure_ns[h] / mean_rate;
  const double mean = std::accumulate(shape.factors.begin(), shape.factors.end(), 0.0) / kHours;
  for (double& f : shape.factors) f /= mean;
  return shape;
}

}  // namespace moesim::sim
