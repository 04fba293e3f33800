// A table indexed by dense ids handed out in order (0, 1, 2, ...) that keeps only a window of
// them: the ids from the oldest one not yet retired to the newest. Retiring from the front frees
// an entry, so memory follows the span of live ids, not the number ever handed out (the
// cluster's sequence table: a run of a million requests holds only those in flight).
//
// Storage is a std::deque: it allocates and frees fixed-size chunks at either end, so memory
// holds the window only (no doubling of a ring that default-constructs, and so touches, its
// whole capacity), and indexing stays O(1). Indexing an id outside the window is a broken
// invariant. push_back and pop_front keep references to the other entries valid.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

#include "sim/core/check.h"

namespace moesim::sim {

template <typename T>
class IdWindow {
 public:
  // Appends an entry; returns its id (the number of entries ever appended before it).
  int32_t push_back(T value) {
    const int64_t id = end_id();
    MOESIM_CHECK(id <= INT32_MAX, "id window: more than 2^31 ids");
    items_.push_back(std::move(value));
    return static_cast<int32_t>(id);
  }

  T& operator[](int64_t id) {
    MOESIM_CHECK(id >= begin_ && id < end_id(), "id window: id outside the live window");
    return items_[static_cast<size_t>(id - begin_)];
  }
  const T& operator[](int64_t id) const {
    MOESIM_CHECK(id >= begin_ && id < end_id(), "id window: id outside the live window");
    return items_[static_cast<size_t>(id - begin_)];
  }

  // Ids ever appended (the next id), the oldest live id, and whether the window is empty.
  int64_t size() const { return end_id(); }
  int64_t front_id() const { return begin_; }
  bool empty() const { return items_.empty(); }
  // Entries in the window (live and not yet retired).
  int64_t window() const { return static_cast<int64_t>(items_.size()); }

  T& front() { return items_.front(); }
  // Retires the oldest entry (destroyed, its memory freed) and its id.
  void pop_front() {
    MOESIM_CHECK(!empty(), "id window: pop_front on an empty window");
    items_.pop_front();
    ++begin_;
  }

 private:
  int64_t end_id() const { return begin_ + static_cast<int64_t>(items_.size()); }

  std::deque<T> items_;
  int64_t begin_ = 0;
};

}  // namespace moesim::sim
