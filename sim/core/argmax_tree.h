// The first index of the largest key among n, under point updates: a tournament tree (each
// inner node holds the winner of its two children, the larger key, the smaller index on a tie).
// Building is O(n), an update O(log n), the winner O(1): a loop that picks "the first of the
// largest" again and again while one key changes between picks (admission choosing a rank, one
// rank's room changing per admission) pays log n per pick instead of n.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "base/check.h"

namespace moesim::sim {

class ArgMaxTree {
 public:
  // A key no real key equals: an index holding it never wins against a real one.
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();

  // Keys 0..n-1 from key_of(i), every one read once.
  template <typename KeyOf>
  void build(int32_t n, KeyOf&& key_of) {
    MOESIM_CHECK(n >= 1, "an argmax tree over no index");
    n_ = n;
    size_ = 1;
    while (size_ < n) size_ *= 2;
    keys_.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) keys_[i] = key_of(i);
    // Leaves past n are index -1 (never wins).
    win_.assign(2 * static_cast<size_t>(size_), -1);
    for (int32_t i = 0; i < n; ++i) win_[size_ + i] = i;
    for (int32_t v = size_ - 1; v >= 1; --v) win_[v] = winner(win_[2 * v], win_[2 * v + 1]);
  }

  // Sets index i's key and replays its matches.
  void update(int32_t i, int64_t key) {
    MOESIM_CHECK(i >= 0 && i < n_, "argmax tree index out of range");
    keys_[i] = key;
    for (int32_t v = (size_ + i) / 2; v >= 1; v /= 2) {
      win_[v] = winner(win_[2 * v], win_[2 * v + 1]);
    }
  }

  // The smallest index of the largest key (n >= 1, so one exists; its key may be kNone).
  int32_t first_max() const { return win_[1]; }
  int64_t key(int32_t i) const { return keys_[i]; }

 private:
  int32_t winner(int32_t a, int32_t b) const {
    if (b < 0) return a;
    if (a < 0) return b;
    // a < b always (a left subtree's indices precede the right's): a wins ties.
    return keys_[b] > keys_[a] ? b : a;
  }

  int32_t n_ = 0;
  int32_t size_ = 0;           // leaves: n_ rounded up to a power of two
  std::vector<int64_t> keys_;  // per index
  std::vector<int32_t> win_;   // 1-based heap layout; win_[size_ + i] = i
};

}  // namespace moesim::sim
