// Pending events in (time, insertion sequence) order: a binary heap.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/event.h"

namespace moesim::sim {

class EventQueue {
 public:
  // Adds an event; assigns and returns its sequence number (ignores ev.seq).
  uint64_t push(Event ev);
  // Removes and returns the earliest event. Precondition: !empty().
  Event pop();
  // The earliest event. Precondition: !empty().
  const Event& top() const { return heap_.front(); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }

 private:
  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace moesim::sim
