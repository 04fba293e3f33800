// Events are plain structs. Order is total: (time, seq), where seq is the insertion sequence
// number assigned by the queue; written once, in EventOrder.
#pragma once

#include <cstdint>

#include "sim/core/time.h"

namespace moesim::sim {

// Index of an event kind registered with the Simulation.
using EventKind = uint32_t;

struct Event {
  SimTime time = 0;
  uint64_t seq = 0;  // insertion sequence, assigned by EventQueue::push
  EventKind kind = 0;
  int64_t id0 = 0;  // meaning depends on kind (e.g. replica, request)
  int64_t id1 = 0;
};

// Strict "runs earlier" order: earlier time first, then earlier insertion.
struct EventOrder {
  bool operator()(const Event& a, const Event& b) const {
    return a.time != b.time ? a.time < b.time : a.seq < b.seq;
  }
};

}  // namespace moesim::sim
