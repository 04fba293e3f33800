#include "sim/workload/diurnal.h"

#include <gtest/gtest.h>

#include <array>

#include "sim/core/rng.h"
#include "sim/workload/trace_model.h"

namespace moesim::sim {
namespace {

// Two days: 4 session starts in each of hours 0-11, 2 in each of hours 12-23, evenly spaced
// (no hash ids: every row is its own session). Mean 3 per hour: factors 4/3 and 2/3.
std::vector<TraceRecord> two_days() {
  std::vector<TraceRecord> rows;
  for (int day = 0; day < 2; ++day) {
    for (int h = 0; h < 24; ++h) {
      const int n = h < 12 ? 4 : 2;
      for (int i = 0; i < n; ++i) {
        TraceRecord& r = rows.emplace_back();
        r.timestamp_ns = day * kNsPerDay + h * kNsPerHour + i * (kNsPerHour / n);
        r.input_tokens = 100;
        r.output_tokens = 10;
      }
    }
  }
  return rows;
}

TEST(DiurnalShape, HourlyFactorsAreStartRatesOverTheMean) {
  const std::vector<TraceRecord> rows = two_days();
  std::vector<SimTime> starts;
  for (const TraceRecord& r : rows) starts.push_back(r.timestamp_ns);
  const DiurnalShape shape = fit_diurnal_shape(starts, 2 * kNsPerDay);
  ASSERT_EQ(shape.factors.size(), 24u);
  for (int h = 0; h < 24; ++h) EXPECT_NEAR(shape.factors[h], h < 12 ? 4.0 / 3 : 2.0 / 3, 1e-12);
  // Under a day: no shape.
  EXPECT_TRUE(fit_diurnal_shape({0, kNsPerHour}, kNsPerDay - 1).empty());
}

// Lambda by hand: 12 h at 4/3 is 16 h of operational time, then 2/3; a day maps to a day.
TEST(DiurnalShape, OperationalTimeAndItsInverse) {
  DiurnalShape shape;
  shape.factors.assign(24, 2.0 / 3);
  for (int h = 0; h < 12; ++h) shape.factors[h] = 4.0 / 3;
  EXPECT_NEAR(shape.operational_ns(12 * kNsPerHour), 16.0 * kNsPerHour, 1e3);
  EXPECT_NEAR(shape.operational_ns(kNsPerDay), 1.0 * kNsPerDay, 1e3);
  EXPECT_NEAR(shape.operational_ns(-12 * kNsPerHour), -8.0 * kNsPerHour, 1e3);
  EXPECT_EQ(shape.real_ns(16.0 * kNsPerHour), 12 * kNsPerHour);
  EXPECT_EQ(shape.real_ns(20.0 * kNsPerHour), 18 * kNsPerHour);
  for (SimTime t : {SimTime{0}, 5 * kNsPerHour + 17, 30 * kNsPerHour, -3 * kNsPerHour}) {
    EXPECT_NEAR(static_cast<double>(shape.real_ns(shape.operational_ns(t))), static_cast<double>(t),
                2.0);
  }
  // A closed hour: nothing starts in it.
  shape.factors.assign(24, 24.0 / 23);
  shape.factors[3] = 0;
  EXPECT_EQ(shape.real_ns(shape.operational_ns(3 * kNsPerHour)), 4 * kNsPerHour);
}

// The model keeps the swing: over 20 generated days, hours 0-11 get twice the requests of hours
// 12-23 (binomial standard error about 1%), and the mean rate is the window's.
TEST(DiurnalShape, TheModelGeneratesTheDailySwing) {
  const std::vector<TraceRecord> rows = two_days();
  const TraceWindow w = select_trace_window(rows, 0.0, 2.0 * 86400, std::nullopt);
  const TraceModel m = fit_trace_model(rows, w);
  ASSERT_FALSE(m.diurnal.empty());
  EXPECT_EQ(m.arrival.kind, TraceArrivalFit::Kind::kRenewal);
  // On operational time the starts are evenly spaced: every gap is 1/3 h.
  EXPECT_LT(m.arrival.gap_cv(), 1e-6);
  TraceModelSampler sampler(m, 1.0);
  RngStream rng(7, "diurnal");
  std::array<int64_t, 2> halves{};
  int64_t n = 0;
  while (auto d = sampler.next(rng)) {
    if (d->arrival_ns >= 20 * kNsPerDay) break;
    ++halves[(d->arrival_ns % kNsPerDay) < 12 * kNsPerHour ? 0 : 1];
    ++n;
  }
  EXPECT_NEAR(static_cast<double>(n), 20 * 72, 20 * 72 * 0.05);
  EXPECT_NEAR(static_cast<double>(halves[0]) / static_cast<double>(halves[1]), 2.0, 0.1);
}

}  // namespace
}  // namespace moesim::sim
