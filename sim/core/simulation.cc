#include "sim/core/simulation.h"

#include <utility>

#include "base/check.h"
#include "sim/core/horizon.h"

namespace moesim::sim {

Simulation::Simulation(uint64_t root_seed) : rngs_(root_seed) {}

EventKind Simulation::register_kind(std::string_view name, EventHandler handler) {
  // Registering while running could reallocate the handler being executed.
  MOESIM_CHECK(!running_, "register_kind called from inside run()");
  MOESIM_CHECK(static_cast<bool>(handler), "event handler is empty");
  kinds_.push_back(KindInfo{std::string(name), std::move(handler)});
  return static_cast<EventKind>(kinds_.size() - 1);
}

void Simulation::schedule_at(SimTime at, EventKind kind, int64_t id0, int64_t id1) {
  MOESIM_CHECK(at >= now_, "event scheduled in the past");
  MOESIM_CHECK(kind < kinds_.size(), "event kind was never registered");
  if (at > kHorizonNs) [[unlikely]] {
    fail_beyond_horizon(at - now_, kind);
  }
  queue_.push(Event{.time = at, .seq = 0, .kind = kind, .id0 = id0, .id1 = id1});
}

void Simulation::schedule_after(SimTime delay, EventKind kind, int64_t id0, int64_t id1) {
  MOESIM_CHECK(delay >= 0, "event scheduled after a negative delay");
  // now_ <= kHorizonNs (every event is), so the subtraction cannot overflow; the sum would.
  if (delay > kHorizonNs - now_) [[unlikely]] {
    MOESIM_CHECK(kind < kinds_.size(), "event kind was never registered");
    fail_beyond_horizon(delay, kind);
  }
  schedule_at(now_ + delay, kind, id0, id1);
}

void Simulation::fail_beyond_horizon(SimTime delay, EventKind kind) const {
  // delay may be near INT64_MAX: the sum is formed in double.
  const double at_s = to_seconds(now_) + to_seconds(delay);
  throw HorizonError("simulation clock: event '" + kinds_[kind].name +
                     "' at t = " + format_number(to_seconds(now_)) + " s + " +
                     format_number(to_seconds(delay)) + " s = " + format_number(at_s) +
                     " s passes the 100-year horizon (" + format_number(kHorizonS) + " s)");
}

uint64_t Simulation::run(SimTime until) {
  MOESIM_CHECK(until >= now_, "run(until) with until earlier than now()");
  MOESIM_CHECK(!running_, "run() called from inside run()");
  running_ = true;
  stopped_ = false;
  uint64_t num_executed = 0;
  while (!stopped_ && !queue_.empty()) {
    if (queue_.top().time > until) {
      now_ = until;
      break;
    }
    const Event ev = queue_.pop();
    now_ = ev.time;
    digest_.add(ev.time, ev.kind, ev.id0, ev.id1);
    ++num_executed;
    ++num_executed_;
    kinds_[ev.kind].handler(ev, *this);
  }
  running_ = false;
  return num_executed;
}

}  // namespace moesim::sim
