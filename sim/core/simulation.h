// One Simulation owns the clock, the event queue, the RNG streams and the event digest of a run.
// No globals: two Simulations can run in one process.
//
// Components register event kinds with a handler; handlers receive the event and a Scheduler,
// the narrow interface through which they can read the clock and schedule future events.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/digest.h"
#include "sim/core/event.h"
#include "sim/core/event_queue.h"
#include "sim/core/rng.h"
#include "sim/core/time.h"

namespace moesim::sim {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual SimTime now() const = 0;
  // Schedules an event at absolute time `at`. Precondition (checked): at >= now(). An event
  // past the horizon (at > kHorizonNs, sim/core/horizon.h) is bad input: HorizonError, naming
  // the event kind.
  virtual void schedule_at(SimTime at, EventKind kind, int64_t id0 = 0, int64_t id1 = 0) = 0;
  // Schedules an event `delay` after now(). Precondition (checked): delay >= 0. now() + delay
  // past the horizon is a HorizonError as in schedule_at() (never an overflow).
  virtual void schedule_after(SimTime delay, EventKind kind, int64_t id0 = 0, int64_t id1 = 0) = 0;
};

using EventHandler = std::function<void(const Event&, Scheduler&)>;

class Simulation final : public Scheduler {
 public:
  explicit Simulation(uint64_t root_seed);

  // Registers an event kind; returns its id (0, 1, 2, ... in registration order). Names are for
  // traces and error messages. Precondition (checked): not called from inside run().
  EventKind register_kind(std::string_view name, EventHandler handler);
  const std::string& kind_name(EventKind kind) const { return kinds_[kind].name; }

  SimTime now() const override { return now_; }
  void schedule_at(SimTime at, EventKind kind, int64_t id0 = 0, int64_t id1 = 0) override;
  void schedule_after(SimTime delay, EventKind kind, int64_t id0 = 0, int64_t id1 = 0) override;

  // Runs events in order until the queue is empty, stop() is called, or the next event is later
  // than `until` (that event stays queued and the clock is set to `until`). Events at exactly
  // `until` are executed. When the queue empties the clock stays at the last event's time.
  // Each executed event's (time, kind, id0, id1) is folded into digest() before its handler runs.
  // Returns the number of events executed by this call. Precondition (checked): until >= now().
  uint64_t run(SimTime until = kSimTimeMax);
  // Makes run() return after the current event. Meant for handlers; each run() call starts
  // un-stopped, so a stop() outside run() has no effect on the next run().
  void stop() { stopped_ = true; }

  RngStream& rng(std::string_view name) { return rngs_.stream(name); }
  uint64_t root_seed() const { return rngs_.root_seed(); }
  const EventDigest& digest() const { return digest_; }
  EventDigest& mutable_digest() { return digest_; }
  uint64_t num_events_executed() const { return num_executed_; }
  size_t num_events_pending() const { return queue_.size(); }

 private:
  [[noreturn]] void fail_beyond_horizon(SimTime delay, EventKind kind) const;

  struct KindInfo {
    std::string name;
    EventHandler handler;
  };
  SimTime now_ = 0;
  bool stopped_ = false;
  bool running_ = false;
  uint64_t num_executed_ = 0;
  EventQueue queue_;
  RngStreams rngs_;
  EventDigest digest_;
  std::vector<KindInfo> kinds_;
};

}  // namespace moesim::sim
