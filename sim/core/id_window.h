// A table indexed by dense ids handed out in order (0, 1, 2, ...) that keeps only a window of
// them: the ids from the oldest one not yet retired to the newest. Retiring from the front frees
// an entry, so memory follows the span of live ids, not the number ever handed out (the
// cluster's sequence table: a run of a million requests holds only those in flight).
//
// Storage is a ring of a power-of-two capacity: entry `id` lives at slot id & (capacity - 1),
// which is unique while the window is no wider than the capacity; a full ring doubles. Indexing
// an id outside the window is a broken invariant. Like std::vector, push_back may move entries
// (references do not survive it); pop_front destroys only the front entry.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/core/check.h"

namespace moesim::sim {

template <typename T>
class IdWindow {
 public:
  IdWindow() : slots_(kInitialCapacity) {}

  // Appends an entry; returns its id (the number of entries ever appended before it).
  int32_t push_back(T value) {
    if (end_ - begin_ == static_cast<int64_t>(slots_.size())) grow();
    const int64_t id = end_++;
    MOESIM_CHECK(id <= INT32_MAX, "id window: more than 2^31 ids");
    slots_[slot(id)] = std::move(value);
    return static_cast<int32_t>(id);
  }

  T& operator[](int64_t id) {
    MOESIM_CHECK(id >= begin_ && id < end_, "id window: id outside the live window");
    return slots_[slot(id)];
  }
  const T& operator[](int64_t id) const {
    MOESIM_CHECK(id >= begin_ && id < end_, "id window: id outside the live window");
    return slots_[slot(id)];
  }

  // Ids ever appended (the next id), the oldest live id, and whether the window is empty.
  int64_t size() const { return end_; }
  int64_t front_id() const { return begin_; }
  bool empty() const { return begin_ == end_; }
  // Entries in the window (live and not yet retired).
  int64_t window() const { return end_ - begin_; }

  T& front() { return (*this)[begin_]; }
  // Retires the oldest entry: it is replaced by T{} (its memory freed) and its id is gone.
  void pop_front() {
    MOESIM_CHECK(!empty(), "id window: pop_front on an empty window");
    slots_[slot(begin_)] = T{};
    ++begin_;
  }

 private:
  static constexpr size_t kInitialCapacity = 64;
  size_t slot(int64_t id) const { return static_cast<size_t>(id) & (slots_.size() - 1); }
  void grow() {
    std::vector<T> bigger(slots_.size() * 2);
    const size_t mask = bigger.size() - 1;
    for (int64_t id = begin_; id < end_; ++id) {
      bigger[static_cast<size_t>(id) & mask] = std::move(slots_[slot(id)]);
    }
    slots_ = std::move(bigger);
  }

  std::vector<T> slots_;
  int64_t begin_ = 0;
  int64_t end_ = 0;
};

}  // namespace moesim::sim
