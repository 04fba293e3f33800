#include "sim/core/simulation.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/distributions.h"
#include "sim/core/horizon.h"

namespace moesim::sim {
namespace {

struct Trace {
  std::vector<std::pair<SimTime, int64_t>> events;  // (time, id0) in execution order
};

TEST(Simulation, HandlersScheduleFutureEventsInOrder) {
  Simulation sim(1);
  Trace trace;
  EventKind tick = 0;
  tick = sim.register_kind("tick", [&](const Event& ev, Scheduler& s) {
    trace.events.emplace_back(s.now(), ev.id0);
    if (ev.id0 < 3) s.schedule_after(10, tick, ev.id0 + 1);
    if (ev.id0 == 0) s.schedule_after(0, tick, 100);  // same time: runs after current event
  });
  sim.schedule_at(5, tick, 0);
  EXPECT_EQ(sim.run(), 5u);
  EXPECT_EQ(trace.events, (std::vector<std::pair<SimTime, int64_t>>{
                              {5, 0}, {5, 100}, {15, 1}, {25, 2}, {35, 3}}));
  EXPECT_EQ(sim.now(), 35);
  EXPECT_EQ(sim.num_events_executed(), 5u);
  EXPECT_EQ(sim.num_events_pending(), 0u);
  EXPECT_EQ(sim.kind_name(tick), "tick");
}

TEST(Simulation, RunUntilLeavesLaterEventsQueuedAndSetsClock) {
  Simulation sim(1);
  std::vector<SimTime> seen;
  const EventKind k =
      sim.register_kind("k", [&](const Event&, Scheduler& s) { seen.push_back(s.now()); });
  for (SimTime t : {10, 20, 30, 40}) sim.schedule_at(t, k);
  EXPECT_EQ(sim.run(20), 2u);  // events at exactly `until` run
  EXPECT_EQ(sim.now(), 20);
  EXPECT_EQ(sim.num_events_pending(), 2u);
  EXPECT_EQ(sim.run(35), 1u);
  EXPECT_EQ(sim.now(), 35);
  EXPECT_EQ(sim.run(), 1u);
  EXPECT_EQ(sim.now(), 40);
  EXPECT_EQ(seen, (std::vector<SimTime>{10, 20, 30, 40}));
  // Nothing left: the clock stays where it is.
  EXPECT_EQ(sim.run(), 0u);
  EXPECT_EQ(sim.now(), 40);
}

TEST(Simulation, StopReturnsAfterCurrentEventAndRunResumes) {
  Simulation sim(1);
  std::vector<int64_t> seen;
  const EventKind k = sim.register_kind("k", [&](const Event& ev, Scheduler&) {
    seen.push_back(ev.id0);
    if (ev.id0 == 1) sim.stop();
  });
  for (int64_t i = 0; i < 4; ++i) sim.schedule_at(i, k, i);
  EXPECT_EQ(sim.run(), 2u);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(sim.now(), 1);
  EXPECT_EQ(sim.run(), 2u);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3}));
}

// A small randomized workload: a chain of jobs whose delays come from the "jobs" stream.
// `perturb_at` changes the id of one event to check the digest reacts.
std::string run_workload(uint64_t seed, int perturb_at) {
  Simulation sim(seed);
  RngStream& rng = sim.rng("jobs");
  int count = 0;
  EventKind job = 0;
  job = sim.register_kind("job", [&](const Event& ev, Scheduler& s) {
    ++count;
    if (count > 200) return;
    const SimTime delay = from_seconds(exponential(rng, 1000.0));
    const int64_t id = count == perturb_at ? ev.id0 + 1 : ev.id0;
    s.schedule_after(delay, job, id, count);
    if (count % 7 == 0) s.schedule_after(0, job, id + 1000, -count);
  });
  sim.schedule_at(0, job, 1);
  sim.run();
  return sim.digest().hex();
}

TEST(Simulation, DigestIsReproducibleAndSensitive) {
  const std::string a = run_workload(42, -1);
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, run_workload(42, -1));
  EXPECT_NE(a, run_workload(42, 150));  // one id changed
  EXPECT_NE(a, run_workload(43, -1));   // different times
}

TEST(Simulation, DigestFoldsTimeKindAndIds) {
  Simulation sim(7);
  const EventKind k = sim.register_kind("k", [](const Event&, Scheduler&) {});
  sim.schedule_at(3, k, 4, 5);
  sim.run();
  EventDigest expected;
  expected.add(3, k, 4, 5);
  EXPECT_EQ(sim.digest().value(), expected.value());
}

TEST(Simulation, TwoSimulationsInOneProcessAreIndependent) {
  const std::string alone = run_workload(42, -1);
  // Interleave two simulations step by step: neither affects the other.
  Simulation a(42);
  Simulation b(42);
  std::vector<double> draws_a;
  std::vector<double> draws_b;
  const EventKind ka = a.register_kind("x", [&](const Event&, Scheduler& s) {
    draws_a.push_back(a.rng("s").uniform01());
    if (draws_a.size() < 10) s.schedule_after(1, 0);
  });
  const EventKind kb = b.register_kind("x", [&](const Event&, Scheduler& s) {
    draws_b.push_back(b.rng("s").uniform01());
    b.rng("other").next_u64();
    if (draws_b.size() < 10) s.schedule_after(1, 0);
  });
  a.schedule_at(0, ka);
  b.schedule_at(0, kb);
  while (a.num_events_pending() > 0 || b.num_events_pending() > 0) {
    a.run(a.now() + 1);
    b.run(b.now() + 1);
  }
  EXPECT_EQ(draws_a, draws_b);
  EXPECT_EQ(a.digest().hex(), b.digest().hex());
  EXPECT_EQ(alone, run_workload(42, -1));
}

// The clock's horizon (sim/core/horizon.h): an event past it is bad input, never an overflow.
TEST(Simulation, EventsUpToTheHorizonRun) {
  Simulation sim(1);
  std::vector<SimTime> seen;
  const EventKind k =
      sim.register_kind("k", [&](const Event&, Scheduler& s) { seen.push_back(s.now()); });
  sim.schedule_at(kHorizonNs, k);
  sim.schedule_after(kHorizonNs - 1, k);
  sim.run();
  EXPECT_EQ(seen, (std::vector<SimTime>{kHorizonNs - 1, kHorizonNs}));
}

// The message of the HorizonError raised when a handler at t = 1.5 s calls `schedule` with the
// handler's own kind ("step_done").
std::string horizon_error_of(const std::function<void(Scheduler&, EventKind)>& schedule) {
  Simulation sim(1);
  EventKind step_done = 0;
  step_done =
      sim.register_kind("step_done", [&](const Event&, Scheduler& s) { schedule(s, step_done); });
  sim.schedule_at(1'500'000'000, step_done);
  try {
    sim.run();
  } catch (const HorizonError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Simulation, AnEventPastTheHorizonIsAnError) {
  EXPECT_EQ(horizon_error_of([](Scheduler& s, EventKind k) { s.schedule_at(kHorizonNs + 1, k); }),
            "simulation clock: event 'step_done' at t = 1.5 s + 3.156e+09 s = 3.156e+09 s passes "
            "the 100-year horizon (3.156e+09 s)");
  // now + delay within int64 but past the horizon, and a delay whose sum would overflow int64.
  EXPECT_EQ(horizon_error_of([](Scheduler& s, EventKind k) { s.schedule_after(kHorizonNs, k); }),
            "simulation clock: event 'step_done' at t = 1.5 s + 3.156e+09 s = 3.156e+09 s passes "
            "the 100-year horizon (3.156e+09 s)");
  EXPECT_EQ(horizon_error_of([](Scheduler& s, EventKind k) { s.schedule_after(kSimTimeMax, k); }),
            "simulation clock: event 'step_done' at t = 1.5 s + 9.223e+09 s = 9.223e+09 s passes "
            "the 100-year horizon (3.156e+09 s)");
}

TEST(Simulation, HorizonErrorsAreConfigErrors) {
  Simulation sim(1);
  const EventKind k = sim.register_kind("k", [](const Event&, Scheduler&) {});
  EXPECT_THROW(sim.schedule_at(kSimTimeMax, k), ConfigError);
  EXPECT_EQ(sim.num_events_pending(), 0u);  // nothing was queued
}

TEST(SimulationDeathTest, ScheduleInThePastAborts) {
  EXPECT_DEATH(
      {
        Simulation sim(1);
        const EventKind k = sim.register_kind(
            "k", [](const Event&, Scheduler& s) { s.schedule_at(s.now() - 1, 0); });
        sim.schedule_at(10, k);
        sim.run();
      },
      "event scheduled in the past");
}

TEST(SimulationDeathTest, UnregisteredKindAborts) {
  EXPECT_DEATH(
      {
        Simulation sim(1);
        sim.schedule_at(0, 3);
      },
      "never registered");
}

}  // namespace
}  // namespace moesim::sim
