// A table indexed by dense ids handed out in order (0, 1, 2, ...) that keeps only a window of
// them: the ids from the oldest one not yet retired to the newest, so memory follows the span of
// live ids, not the number ever handed out (the cluster's sequence table holds only the requests
// in flight). Storage is chunks of 256 consecutive entries that never move (references stay
// valid through push_back and pop_front), each freed once all its entries are retired; indexing
// is O(1), and neighbours in id are neighbours in memory. Indexing outside the window is a broken
// invariant. docs/reliability.md ("Memory and overload").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/check.h"

namespace moesim::sim {

template <typename T>
class IdWindow {
 public:
  // Appends an entry; returns its id (the number of entries ever appended before it).
  int32_t push_back(T value) {
    const int64_t id = end_;
    MOESIM_CHECK(id <= INT32_MAX, "id window: more than 2^31 ids");
    const auto slot = static_cast<size_t>((id >> kChunkBits) - first_chunk_);
    if (slot == chunks_.size()) {
      chunks_.emplace_back();
      chunks_.back().reserve(kChunk);
    }
    chunks_[slot].push_back(std::move(value));
    ++end_;
    return static_cast<int32_t>(id);
  }

  T& operator[](int64_t id) {
    MOESIM_CHECK(id >= begin_ && id < end_, "id window: id outside the live window");
    return at(id);
  }
  const T& operator[](int64_t id) const {
    MOESIM_CHECK(id >= begin_ && id < end_, "id window: id outside the live window");
    return at(id);
  }

  // Hints the cache to fetch the first `bytes` of entry `id` (a no-op for an id outside the
  // window): loops over many sequences call it a few entries ahead, for the fields they read.
  void prefetch(int64_t id, size_t bytes = sizeof(T)) const {
    if (id < begin_ || id >= end_) return;
    const char* p = reinterpret_cast<const char*>(&at(id));
    for (size_t line = 0; line < std::min(bytes, sizeof(T)); line += 64) prefetch_line(p + line);
  }

  // Ids ever appended (the next id), the oldest live id, and whether the window is empty.
  int64_t size() const { return end_; }
  int64_t front_id() const { return begin_; }
  bool empty() const { return begin_ == end_; }
  // Entries in the window (live and not yet retired).
  int64_t window() const { return end_ - begin_; }

  T& front() { return (*this)[begin_]; }
  // Retires the oldest entry (reset to T{}, its heap memory freed; its chunk freed with the
  // chunk's last entry) and its id.
  void pop_front() {
    MOESIM_CHECK(!empty(), "id window: pop_front on an empty window");
    at(begin_) = T{};
    ++begin_;
    if ((begin_ & (kChunk - 1)) != 0) return;
    // The front chunk is retired: free it; drop the freed slots once they are half the list.
    std::vector<T>().swap(chunks_[num_freed_++]);
    if (num_freed_ >= 16 && 2 * num_freed_ >= chunks_.size()) {
      chunks_.erase(chunks_.begin(), chunks_.begin() + static_cast<std::ptrdiff_t>(num_freed_));
      first_chunk_ += static_cast<int64_t>(num_freed_);
      num_freed_ = 0;
    }
  }

 private:
  static constexpr int kChunkBits = 8;
  static constexpr int64_t kChunk = int64_t{1} << kChunkBits;

  T& at(int64_t id) {
    return chunks_[static_cast<size_t>((id >> kChunkBits) - first_chunk_)]
                  [static_cast<size_t>(id & (kChunk - 1))];
  }
  const T& at(int64_t id) const {
    return chunks_[static_cast<size_t>((id >> kChunkBits) - first_chunk_)]
                  [static_cast<size_t>(id & (kChunk - 1))];
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

  // chunks_[i] holds chunk first_chunk_ + i; the first num_freed_ of them are retired (empty).
  std::vector<std::vector<T>> chunks_;
  int64_t first_chunk_ = 0;
  size_t num_freed_ = 0;
  int64_t begin_ = 0;  // id of the oldest live entry
  int64_t end_ = 0;    // the next id
};

}  // namespace moesim::sim
