// A binary min-heap on EventOrder. Sequence numbers are unique, so the order is total and the
// pop order does not depend on the heap's internal layout.
#include "sim/core/event_queue.h"

#include <utility>

#include "base/check.h"

namespace moesim::sim {

uint64_t EventQueue::push(Event ev) {
  ev.seq = next_seq_++;
  heap_.push_back(ev);
  const EventOrder earlier;
  size_t i = heap_.size() - 1;
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!earlier(heap_[i], heap_[parent])) break;
    std::swap(heap_[i], heap_[parent]);
    i = parent;
  }
  return ev.seq;
}

Event EventQueue::pop() {
  MOESIM_CHECK(!heap_.empty(), "pop from an empty event queue");
  Event out = heap_.front();
  heap_.front() = heap_.back();
  heap_.pop_back();
  const EventOrder earlier;
  const size_t n = heap_.size();
  size_t i = 0;
  while (true) {
    const size_t left = 2 * i + 1;
    if (left >= n) break;
    const size_t right = left + 1;
    const size_t child = (right < n && earlier(heap_[right], heap_[left])) ? right : left;
    if (!earlier(heap_[child], heap_[i])) break;
    std::swap(heap_[i], heap_[child]);
    i = child;
  }
  return out;
}

}  // namespace moesim::sim
