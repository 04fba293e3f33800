// The paged KV cache against an obvious reference (a map of entries and a linear LRU scan) on
// random operation sequences, plus the contract cases spelled out: block conservation, LRU
// order, pinned entries never evicted, failed allocations change nothing, high-water.
#include "sim/memory/kv_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace moesim::sim {
namespace {

// The obvious implementation: entries in an ordered map, eviction by scanning for the smallest
// (tick, key) among unpinned entries.
class ReferenceCache {
 public:
  explicit ReferenceCache(int64_t num_blocks) : num_blocks_(num_blocks), free_(num_blocks) {}

  struct Entry {
    int64_t blocks = 0;
    int64_t tokens = 0;
    int32_t refs = 0;
    uint64_t tick = 0;
  };

  int64_t free_blocks() const { return free_; }
  int64_t cached_blocks() const {
    int64_t n = 0;
    for (const auto& [k, e] : entries_) n += e.blocks;
    return n;
  }
  int64_t evictable_blocks() const {
    int64_t n = 0;
    for (const auto& [k, e] : entries_) n += e.refs == 0 ? e.blocks : 0;
    return n;
  }
  int64_t owned_blocks() const { return num_blocks_ - free_ - cached_blocks(); }
  int64_t high_water() const { return high_water_; }
  int64_t evictions() const { return evictions_; }
  const std::map<uint64_t, Entry>& entries() const { return entries_; }

  bool allocate(int64_t blocks) {
    if (blocks > free_ + evictable_blocks()) return false;
    while (free_ < blocks) {
      auto victim = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->second.refs > 0) continue;
        if (victim == entries_.end() || it->second.tick < victim->second.tick ||
            (it->second.tick == victim->second.tick && it->first < victim->first)) {
          victim = it;
        }
      }
      free_ += victim->second.blocks;
      entries_.erase(victim);
      ++evictions_;
    }
    free_ -= blocks;
    high_water_ = std::max(high_water_, num_blocks_ - free_);
    return true;
  }
  void release(int64_t blocks) { free_ += blocks; }
  int64_t match_and_pin(const std::vector<uint64_t>& keys, uint64_t tick) {
    int64_t n = 0;
    for (uint64_t k : keys) {
      auto it = entries_.find(k);
      if (it == entries_.end()) break;
      it->second.refs++;
      it->second.tick = tick;
      ++n;
    }
    return n;
  }
  void unpin(const std::vector<uint64_t>& keys, uint64_t tick) {
    for (uint64_t k : keys) {
      Entry& e = entries_.at(k);
      if (--e.refs == 0) e.tick = tick;
    }
  }
  void insert_pinned(uint64_t key, int64_t blocks, int64_t tokens, uint64_t tick) {
    entries_[key] = Entry{blocks, tokens, 1, tick};
  }
  int64_t insert_unpinned_merge(uint64_t key, int64_t blocks, int64_t tokens, uint64_t tick) {
    auto it = entries_.find(key);
    if (it != entries_.end()) blocks += it->second.blocks;
    entries_[key] = Entry{blocks, tokens, 0, tick};
    return blocks;
  }

 private:
  int64_t num_blocks_;
  int64_t free_;
  int64_t high_water_ = 0;
  int64_t evictions_ = 0;
  std::map<uint64_t, Entry> entries_;
};

void expect_same(const KvCache& c, const ReferenceCache& r, int step) {
  ASSERT_EQ(c.free_blocks(), r.free_blocks()) << "step " << step;
  ASSERT_EQ(c.cached_blocks(), r.cached_blocks()) << "step " << step;
  ASSERT_EQ(c.evictable_blocks(), r.evictable_blocks()) << "step " << step;
  ASSERT_EQ(c.owned_blocks(), r.owned_blocks()) << "step " << step;
  ASSERT_EQ(c.high_water_blocks(), r.high_water()) << "step " << step;
  ASSERT_EQ(c.num_evictions(), r.evictions()) << "step " << step;
  // Conservation: every block is free, owned or cached.
  ASSERT_EQ(c.free_blocks() + c.owned_blocks() + c.cached_blocks(), c.num_blocks());
  ASSERT_GE(c.free_blocks(), 0);
  ASSERT_GE(c.owned_blocks(), 0);
  for (uint64_t key = 0; key < 40; ++key) {
    auto it = r.entries().find(key);
    ASSERT_EQ(c.contains(key), it != r.entries().end()) << "key " << key << " step " << step;
    ASSERT_EQ(c.entry_blocks(key), it == r.entries().end() ? 0 : it->second.blocks);
  }
}

class KvCacheRandomTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(KvCacheRandomTest, MatchesReference) {
  std::mt19937 rng(GetParam());
  auto uniform = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t total = uniform(8, 64);
  KvCache cache(total, 16);
  KeyPresence presence;  // counted by the cache: 1 for each key it holds
  cache.set_presence(&presence);
  ReferenceCache ref(total);
  // Pins we hold (one element per pin), to unpin later.
  std::vector<uint64_t> pins;
  uint64_t tick = 0;
  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(uniform(0, 6));
    ++tick;
    if (op == 0) {  // allocate
      int64_t b = uniform(0, total / 3);
      ASSERT_EQ(cache.can_allocate(b), b <= ref.free_blocks() + ref.evictable_blocks());
      ASSERT_EQ(cache.allocate(b), ref.allocate(b)) << "step " << step;
    } else if (op == 1) {  // release owned blocks
      int64_t owned = ref.owned_blocks();
      if (owned == 0) continue;
      int64_t b = uniform(1, owned);
      cache.release(b);
      ref.release(b);
    } else if (op == 2) {  // insert a new pinned entry from owned blocks
      int64_t owned = ref.owned_blocks();
      uint64_t key = static_cast<uint64_t>(uniform(0, 39));
      if (owned == 0 || ref.entries().count(key)) continue;
      int64_t b = uniform(1, std::min<int64_t>(owned, 4));
      cache.insert_pinned(key, b, b * 16, tick);
      ref.insert_pinned(key, b, b * 16, tick);
      pins.push_back(key);
    } else if (op == 3) {  // insert / merge an unpinned entry
      int64_t owned = ref.owned_blocks();
      uint64_t key = static_cast<uint64_t>(uniform(0, 39));
      auto it = ref.entries().find(key);
      if (owned == 0 || (it != ref.entries().end() && it->second.refs > 0)) continue;
      int64_t b = uniform(1, std::min<int64_t>(owned, 4));
      ASSERT_EQ(cache.insert_unpinned_merge(key, b, 512, tick),
                ref.insert_unpinned_merge(key, b, 512, tick));
    } else if (op == 4) {  // match a prefix of keys
      std::vector<uint64_t> keys;
      for (int64_t i = uniform(0, 4); i > 0; --i) keys.push_back(uniform(0, 39));
      int64_t n = cache.match_and_pin(keys, tick);
      ASSERT_EQ(n, ref.match_and_pin(keys, tick)) << "step " << step;
      pins.insert(pins.end(), keys.begin(), keys.begin() + n);
    } else if (op == 5) {  // match one key
      uint64_t key = static_cast<uint64_t>(uniform(0, 39));
      int64_t tokens = cache.match_and_pin_one(key, tick);
      auto it = ref.entries().find(key);
      ASSERT_EQ(tokens, it == ref.entries().end() ? 0 : it->second.tokens);
      if (it != ref.entries().end()) {
        ref.match_and_pin({key}, tick);
        pins.push_back(key);
      }
    } else {  // unpin a few held pins
      for (int64_t i = uniform(1, 3); i > 0 && !pins.empty(); --i) {
        size_t at = static_cast<size_t>(uniform(0, static_cast<int64_t>(pins.size()) - 1));
        std::vector<uint64_t> key{pins[at]};
        pins.erase(pins.begin() + static_cast<std::ptrdiff_t>(at));
        cache.unpin(key, tick);
        ref.unpin(key, tick);
      }
    }
    expect_same(cache, ref, step);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_EQ(presence.size(), ref.entries().size()) << "step " << step;
    for (const auto& [key, count] : presence) {
      ASSERT_EQ(count, 1) << "key " << key << " step " << step;
      ASSERT_TRUE(ref.entries().count(key)) << "key " << key << " step " << step;
    }
    // Pinned entries are never evicted.
    for (uint64_t key : pins) ASSERT_TRUE(cache.contains(key)) << "pinned key " << key;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvCacheRandomTest, ::testing::Range(1u, 21u));

// Two caches sharing one presence count: a key held by both counts 2, by one 1, by none is
// absent (inserted, merged, evicted).
TEST(KvCacheTest, SharedPresenceCountsTheCachesHoldingEachKey) {
  KeyPresence presence;
  KvCache a(8, 16), b(8, 16);
  a.set_presence(&presence);
  b.set_presence(&presence);
  ASSERT_TRUE(a.allocate(4));
  ASSERT_TRUE(b.allocate(4));
  a.insert_unpinned_merge(1, 1, 16, 1);
  b.insert_unpinned_merge(1, 1, 16, 2);
  a.insert_pinned(2, 1, 16, 3);
  EXPECT_EQ(presence.at(1), 2);
  EXPECT_EQ(presence.at(2), 1);
  a.insert_unpinned_merge(1, 1, 16, 4);  // merged: still one entry in a
  EXPECT_EQ(presence.at(1), 2);
  // b's entry 1 (1 block) is evicted to make room for 5 more blocks.
  ASSERT_TRUE(b.allocate(5));
  EXPECT_FALSE(b.contains(1));
  EXPECT_EQ(presence.at(1), 1);
  ASSERT_TRUE(a.allocate(6));  // evicts a's unpinned entry 1 (2 blocks)
  EXPECT_FALSE(a.contains(1));
  EXPECT_EQ(presence.count(1), 0u);
  EXPECT_EQ(presence.at(2), 1);  // pinned: kept
}

TEST(KvCacheTest, BlocksForTokensRoundsUp) {
  KvCache c(10, 64);
  EXPECT_EQ(c.blocks_for_tokens(0), 0);
  EXPECT_EQ(c.blocks_for_tokens(1), 1);
  EXPECT_EQ(c.blocks_for_tokens(64), 1);
  EXPECT_EQ(c.blocks_for_tokens(65), 2);
}

TEST(KvCacheTest, FailedAllocationChangesNothing) {
  KvCache c(10, 16);
  ASSERT_TRUE(c.allocate(6));
  c.insert_pinned(1, 2, 32, 1);
  c.insert_unpinned_merge(2, 2, 32, 2);
  // free 4 + evictable 2 = 6 < 7
  EXPECT_FALSE(c.can_allocate(7));
  EXPECT_FALSE(c.allocate(7));
  EXPECT_EQ(c.free_blocks(), 4);
  EXPECT_EQ(c.cached_blocks(), 4);
  EXPECT_EQ(c.owned_blocks(), 2);
  EXPECT_TRUE(c.contains(2));
  EXPECT_EQ(c.num_evictions(), 0);
}

TEST(KvCacheTest, EvictsLeastRecentlyUsedFirst) {
  KvCache c(6, 16);
  ASSERT_TRUE(c.allocate(6));
  c.insert_unpinned_merge(10, 2, 32, /*tick=*/3);
  c.insert_unpinned_merge(11, 2, 32, /*tick=*/1);
  c.insert_unpinned_merge(12, 2, 32, /*tick=*/2);
  // Touch 11: pin and unpin it at tick 5, so 12 is now the oldest, then 10.
  uint64_t k11 = 11;
  EXPECT_EQ(c.match_and_pin({&k11, 1}, 4), 1);
  c.unpin({&k11, 1}, 5);
  ASSERT_TRUE(c.allocate(2));
  EXPECT_FALSE(c.contains(12));
  EXPECT_TRUE(c.contains(10));
  EXPECT_TRUE(c.contains(11));
  ASSERT_TRUE(c.allocate(2));
  EXPECT_FALSE(c.contains(10));
  EXPECT_TRUE(c.contains(11));
  EXPECT_EQ(c.num_evictions(), 2);
}

TEST(KvCacheTest, PinnedEntriesAreNeverEvicted) {
  KvCache c(4, 16);
  ASSERT_TRUE(c.allocate(4));
  c.insert_pinned(1, 2, 32, 1);
  c.insert_unpinned_merge(2, 2, 32, 2);
  EXPECT_EQ(c.evictable_blocks(), 2);
  EXPECT_FALSE(c.allocate(3));
  ASSERT_TRUE(c.allocate(2));
  EXPECT_TRUE(c.contains(1));
  EXPECT_FALSE(c.contains(2));
  EXPECT_FALSE(c.can_allocate(1));
  // Once unpinned it becomes evictable.
  uint64_t k = 1;
  c.unpin({&k, 1}, 3);
  EXPECT_EQ(c.evictable_blocks(), 2);
  EXPECT_TRUE(c.allocate(1));
  EXPECT_FALSE(c.contains(1));
  EXPECT_EQ(c.free_blocks(), 1);
}

TEST(KvCacheTest, PrefixMatchStopsAtFirstMiss) {
  KvCache c(8, 16);
  ASSERT_TRUE(c.allocate(3));
  c.insert_unpinned_merge(1, 1, 512, 1);
  c.insert_unpinned_merge(3, 1, 512, 1);
  std::vector<uint64_t> keys{1, 2, 3};
  EXPECT_EQ(c.match_and_pin(keys, 2), 1);
  EXPECT_EQ(c.evictable_blocks(), 1);  // entry 3 only
  EXPECT_EQ(c.match_and_pin_one(3, 3), 512);
  EXPECT_EQ(c.match_and_pin_one(2, 3), 0);
  EXPECT_EQ(c.evictable_blocks(), 0);
}

TEST(KvCacheTest, MergeAddsBlocksToAnUnpinnedEntry) {
  KvCache c(8, 16);
  ASSERT_TRUE(c.allocate(5));
  EXPECT_EQ(c.insert_unpinned_merge(7, 2, 32, 1), 2);
  EXPECT_EQ(c.insert_unpinned_merge(7, 3, 80, 2), 5);
  EXPECT_EQ(c.entry_blocks(7), 5);
  EXPECT_EQ(c.cached_blocks(), 5);
  EXPECT_EQ(c.owned_blocks(), 0);
}

TEST(KvCacheTest, HighWaterIsTheLargestNonFreeCount) {
  KvCache c(10, 16);
  ASSERT_TRUE(c.allocate(3));
  ASSERT_TRUE(c.allocate(4));
  c.release(5);
  ASSERT_TRUE(c.allocate(1));
  EXPECT_EQ(c.high_water_blocks(), 7);
  // Moving owned blocks into the cache does not free them.
  c.insert_unpinned_merge(1, 3, 48, 1);
  // free 7 + evictable 3: evicts the entry, then 8 blocks are in use.
  ASSERT_TRUE(c.allocate(8));
  EXPECT_EQ(c.high_water_blocks(), 8);
}

}  // namespace
}  // namespace moesim::sim
