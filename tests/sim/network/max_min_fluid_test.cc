// MaxMinFluid against an obvious implementation: textbook progressive filling re-solved from
// scratch at every event, with linear scans everywhere, on tiny random graphs.
#include "sim/network/max_min_fluid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/core/rng.h"

namespace moesim::sim {
namespace {

struct Flow {
  std::vector<int32_t> route;
  double bytes;
  double start_s;
};

// Max-min rates by the textbook definition: repeatedly find the link with the smallest fair
// share among links carrying unfixed flows and fix those flows at that share.
std::vector<double> brute_force_rates(const std::vector<double>& capacity,
                                      const std::vector<Flow>& flows,
                                      const std::vector<bool>& active) {
  std::vector<double> rate(flows.size(), 0.0);
  std::vector<bool> fixed(flows.size(), false);
  std::vector<double> cap_left = capacity;
  for (;;) {
    int32_t best_link = -1;
    double best_share = 0;
    for (size_t l = 0; l < capacity.size(); ++l) {
      int32_t n = 0;
      for (size_t f = 0; f < flows.size(); ++f) {
        if (active[f] && !fixed[f] &&
            std::count(flows[f].route.begin(), flows[f].route.end(), static_cast<int32_t>(l))) {
          ++n;
        }
      }
      if (n == 0) continue;
      const double share = std::max(0.0, cap_left[l]) / n;
      if (best_link < 0 || share < best_share) {
        best_link = static_cast<int32_t>(l);
        best_share = share;
      }
    }
    if (best_link < 0) return rate;
    for (size_t f = 0; f < flows.size(); ++f) {
      const auto& r = flows[f].route;
      if (!active[f] || fixed[f] || !std::count(r.begin(), r.end(), best_link)) continue;
      fixed[f] = true;
      rate[f] = best_share;
      for (int32_t l : r) cap_left[l] -= best_share;
    }
  }
}

// Finish times by re-solving from scratch at every flow start or finish.
std::vector<double> brute_force_finish(const std::vector<double>& capacity,
                                       const std::vector<Flow>& flows) {
  const size_t n = flows.size();
  std::vector<double> remaining(n), finish(n, -1);
  for (size_t f = 0; f < n; ++f) remaining[f] = flows[f].bytes;
  double now = 0;
  for (;;) {
    std::vector<bool> active(n);
    bool any_left = false;
    for (size_t f = 0; f < n; ++f) {
      active[f] = finish[f] < 0 && flows[f].start_s <= now * (1 + 1e-12) + 1e-18;
      any_left = any_left || finish[f] < 0;
    }
    if (!any_left) return finish;
    const std::vector<double> rate = brute_force_rates(capacity, flows, active);
    double dt = INFINITY;
    for (size_t f = 0; f < n; ++f) {
      if (active[f]) dt = std::min(dt, remaining[f] / rate[f]);
      if (finish[f] < 0 && !active[f]) dt = std::min(dt, flows[f].start_s - now);
    }
    for (size_t f = 0; f < n; ++f) {
      if (!active[f]) continue;
      if (remaining[f] / rate[f] <= dt * (1 + 1e-9)) {
        finish[f] = now + dt;
      } else {
        remaining[f] -= rate[f] * dt;
      }
    }
    now += dt;
  }
}

std::vector<double> solver_finish(const std::vector<double>& capacity,
                                  const std::vector<Flow>& flows) {
  MaxMinFluid solver;
  solver.reset(capacity);
  for (const Flow& f : flows) solver.add_flow(f.route, f.bytes, f.start_s);
  solver.run_to_completion();
  std::vector<double> finish;
  for (int32_t f = 0; f < solver.num_flows(); ++f) finish.push_back(solver.finish_time_s(f));
  return finish;
}

TEST(MaxMinFluid, TwoFlowsOnOneLinkShareThenTheSurvivorTakesAll) {
  // Capacity 1 B/s; flows of 1 and 3 bytes: both at 0.5 B/s until t = 2, then the second alone
  // moves its last 2 bytes at 1 B/s: t = 4.
  MaxMinFluid solver;
  std::vector<double> capacity = {1.0};
  solver.reset(capacity);
  std::vector<int32_t> route = {0};
  solver.add_flow(route, 1.0, 0);
  solver.add_flow(route, 3.0, 0);
  EXPECT_DOUBLE_EQ(solver.next_event_delay_s(), 2.0);
  EXPECT_DOUBLE_EQ(solver.rate_bytes_per_s(0), 0.5);
  solver.advance(2.0);
  EXPECT_DOUBLE_EQ(solver.finish_time_s(0), 2.0);
  EXPECT_DOUBLE_EQ(solver.remaining_bytes(1), 2.0);
  solver.run_to_completion();
  EXPECT_DOUBLE_EQ(solver.finish_time_s(1), 4.0);
}

TEST(MaxMinFluid, ClassicParkingLot) {
  // Links 0 (cap 1) and 1 (cap 2). Flow A uses both, B only link 0, C only link 1.
  // Max-min: link 0 share 0.5 fixes A and B at 0.5; C gets 2 - 0.5 = 1.5.
  MaxMinFluid solver;
  std::vector<double> capacity = {1.0, 2.0};
  solver.reset(capacity);
  std::vector<int32_t> both = {0, 1}, first = {0}, second = {1};
  solver.add_flow(both, 10, 0);
  solver.add_flow(first, 10, 0);
  solver.add_flow(second, 10, 0);
  solver.next_event_delay_s();
  EXPECT_DOUBLE_EQ(solver.rate_bytes_per_s(0), 0.5);
  EXPECT_DOUBLE_EQ(solver.rate_bytes_per_s(1), 0.5);
  EXPECT_DOUBLE_EQ(solver.rate_bytes_per_s(2), 1.5);
}

TEST(MaxMinFluid, StartDelayKeepsAFlowOffTheLink) {
  MaxMinFluid solver;
  std::vector<double> capacity = {1.0};
  solver.reset(capacity);
  std::vector<int32_t> route = {0};
  solver.add_flow(route, 1.0, 0);
  solver.add_flow(route, 1.0, 5.0);
  solver.run_to_completion();
  EXPECT_DOUBLE_EQ(solver.finish_time_s(0), 1.0);
  EXPECT_DOUBLE_EQ(solver.finish_time_s(1), 6.0);
}

TEST(MaxMinFluid, MatchesBruteForceOnRandomTinyGraphs) {
  RngStream rng(42, "max_min_fluid_test");
  for (int trial = 0; trial < 300; ++trial) {
    const int32_t num_links = 1 + static_cast<int32_t>(rng.uniform_int(6));
    const int32_t num_flows = 1 + static_cast<int32_t>(rng.uniform_int(10));
    std::vector<double> capacity(num_links);
    for (double& c : capacity) c = 1.0 + static_cast<double>(rng.uniform_int(4));
    std::vector<Flow> flows(num_flows);
    for (Flow& f : flows) {
      for (int32_t l = 0; l < num_links; ++l) {
        if (rng.uniform_int(2)) f.route.push_back(l);
      }
      if (f.route.empty()) f.route.push_back(static_cast<int32_t>(rng.uniform_int(num_links)));
      // Equal sizes and start times are frequent, to exercise simultaneous events.
      f.bytes = 1.0 + static_cast<double>(rng.uniform_int(5));
      f.start_s = rng.uniform_int(3) == 0 ? static_cast<double>(rng.uniform_int(3)) : 0.0;
    }
    const std::vector<double> expected = brute_force_finish(capacity, flows);
    const std::vector<double> actual = solver_finish(capacity, flows);
    ASSERT_EQ(expected.size(), actual.size());
    for (size_t f = 0; f < flows.size(); ++f) {
      EXPECT_NEAR(actual[f], expected[f], 1e-7 * expected[f]) << "trial " << trial << " flow " << f;
    }
  }
}

TEST(MaxMinFluid, RatesAreMaxMinFairOnRandomGraphs) {
  // Characterisation: rates are feasible, and every flow crosses a saturated link on which no
  // flow has a larger rate.
  RngStream rng(7, "max_min_fluid_fairness");
  for (int trial = 0; trial < 200; ++trial) {
    const int32_t num_links = 1 + static_cast<int32_t>(rng.uniform_int(8));
    const int32_t num_flows = 1 + static_cast<int32_t>(rng.uniform_int(12));
    std::vector<double> capacity(num_links);
    for (double& c : capacity) c = 0.5 + rng.uniform01() * 4;
    std::vector<std::vector<int32_t>> routes(num_flows);
    MaxMinFluid solver;
    solver.reset(capacity);
    for (auto& r : routes) {
      for (int32_t l = 0; l < num_links; ++l) {
        if (rng.uniform_int(3) == 0) r.push_back(l);
      }
      if (r.empty()) r.push_back(static_cast<int32_t>(rng.uniform_int(num_links)));
      solver.add_flow(r, 100.0, 0);
    }
    solver.next_event_delay_s();
    std::vector<double> load(num_links, 0.0), max_rate(num_links, 0.0);
    for (int32_t f = 0; f < num_flows; ++f) {
      for (int32_t l : routes[f]) {
        load[l] += solver.rate_bytes_per_s(f);
        max_rate[l] = std::max(max_rate[l], solver.rate_bytes_per_s(f));
      }
    }
    for (int32_t l = 0; l < num_links; ++l) EXPECT_LE(load[l], capacity[l] * (1 + 1e-12));
    for (int32_t f = 0; f < num_flows; ++f) {
      bool has_bottleneck = false;
      for (int32_t l : routes[f]) {
        has_bottleneck =
            has_bottleneck || (load[l] >= capacity[l] * (1 - 1e-12) &&
                               solver.rate_bytes_per_s(f) >= max_rate[l] * (1 - 1e-12));
      }
      EXPECT_TRUE(has_bottleneck) << "trial " << trial << " flow " << f;
    }
  }
}

}  // namespace
}  // namespace moesim::sim
