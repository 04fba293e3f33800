#include "sim/core/simulation.h"

#include <utility>

#include "sim/core/check.h"

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
  queue_.push(Event{.time = at, .seq = 0, .kind = kind, .id0 = id0, .id1 = id1});
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
