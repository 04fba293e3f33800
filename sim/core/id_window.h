// A table indexed by dense ids handed out in order (0, 1, 2, ...) that keeps only a window of
// them: the ids from the oldest one not yet retired to the newest. Retiring from the front frees
// an entry, so memory follows the span of live ids, not the number ever handed out (the
// cluster's sequence table: a run of a million requests holds only those in flight).
//
// Storage is chunks of 256 consecutive entries (each a vector reserved to its full size, so
// appending never moves an entry and references to the others stay valid through push_back and
// pop_front). Retiring from the front resets the entry to T{} (its own heap memory freed) and
// frees the chunk once all of its entries are retired, so memory holds the window plus at most
// one chunk; no ring is doubled, and so no capacity is touched beyond that. Indexing is O(1):
// one lookup in a short list of chunks, then the entry, which sits next to its neighbours in id
// (the per-sequence loops of a step walk ids in near order). Indexing an id outside the window
// is a broken invariant.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "sim/core/check.h"

namespace moesim::sim {

template <typename T>
class IdWindow {
 public:
  // Appends an entry; returns its id (the number of entries ever appended before it).
  int32_t push_back(T value) {
    const int64_t id = end_id();
    MOESIM_CHECK(id <= INT32_MAX, "id window: more than 2^31 ids");
    const size_t pos = offset_ + static_cast<size_t>(count_);
    if (pos / kChunk >= chunks_.size()) {
      chunks_.emplace_back();
      chunks_.back().reserve(kChunk);
    }
    chunks_[pos / kChunk].push_back(std::move(value));
    ++count_;
    return static_cast<int32_t>(id);
  }

  T& operator[](int64_t id) {
    MOESIM_CHECK(id >= begin_ && id < end_id(), "id window: id outside the live window");
    return at(static_cast<size_t>(id - begin_));
  }
  const T& operator[](int64_t id) const {
    MOESIM_CHECK(id >= begin_ && id < end_id(), "id window: id outside the live window");
    return at(static_cast<size_t>(id - begin_));
  }

  // Hints the cache to fetch the first `bytes` of entry `id` (a no-op for an id outside the
  // window): loops over many sequences call it a few entries ahead, for the fields they read.
  void prefetch(int64_t id, size_t bytes = sizeof(T)) const {
    if (id < begin_ || id >= end_id()) return;
    const char* p = reinterpret_cast<const char*>(&at(static_cast<size_t>(id - begin_)));
    for (size_t line = 0; line < std::min(bytes, sizeof(T)); line += 64) prefetch_line(p + line);
  }

  // Ids ever appended (the next id), the oldest live id, and whether the window is empty.
  int64_t size() const { return end_id(); }
  int64_t front_id() const { return begin_; }
  bool empty() const { return count_ == 0; }
  // Entries in the window (live and not yet retired).
  int64_t window() const { return count_; }

  T& front() { return (*this)[begin_]; }
  // Retires the oldest entry (reset to T{}, its heap memory freed; its chunk freed with the
  // chunk's last entry) and its id.
  void pop_front() {
    MOESIM_CHECK(!empty(), "id window: pop_front on an empty window");
    chunks_.front()[offset_] = T{};
    ++begin_;
    --count_;
    if (++offset_ == kChunk) {
      chunks_.pop_front();
      offset_ = 0;
    }
  }

 private:
  static constexpr size_t kChunk = 256;

  int64_t end_id() const { return begin_ + count_; }
  // The entry `i` places after the oldest live one.
  T& at(size_t i) {
    const size_t pos = offset_ + i;
    return chunks_[pos / kChunk][pos % kChunk];
  }
  const T& at(size_t i) const {
    const size_t pos = offset_ + i;
    return chunks_[pos / kChunk][pos % kChunk];
  }
  // GCC 12 drops a __builtin_prefetch whose address comes from container indexing inside a
  // loop; on x86-64 the instruction is written out.
  static void prefetch_line(const char* p) {
#if defined(__x86_64__)
    asm volatile("prefetcht0 %0" : : "m"(*p));
#else
    __builtin_prefetch(p);
#endif
  }

  std::deque<std::vector<T>> chunks_;  // chunk k holds positions [k * kChunk, (k + 1) * kChunk)
  size_t offset_ = 0;                  // position of the oldest live entry in chunks_.front()
  int64_t count_ = 0;                  // live entries
  int64_t begin_ = 0;                  // id of the oldest live entry
};

}  // namespace moesim::sim
