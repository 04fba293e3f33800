// The paged KV / latent cache of one attention rank: a pool of fixed-size blocks plus a prefix
// cache of finished content that later requests may re-use.
//
// Every block is in exactly one state: free, owned by a running sequence, or held by a prefix
// cache entry. Entries are keyed by a 64-bit content key: a Mooncake-style prefix-block hash
// (512 tokens of prompt), or a session key (the whole context of an agent session's last turn).
// An entry pinned by a running sequence (refs > 0) is never evicted; unpinned entries are
// evicted least-recently-used first when an allocation needs room. Nothing here reads clocks:
// recency is a counter the caller advances.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <unordered_map>
#include <utility>

namespace moesim::sim {

// How many of several caches (a replica's attention ranks) hold each key: a key absent here is
// in none of them, so a lookup on each can be skipped. Kept by every cache it is set on.
using KeyPresence = std::unordered_map<uint64_t, int32_t>;

class KvCache {
 public:
  KvCache(int64_t num_blocks, int64_t block_tokens);

  // Counts this cache's keys into `presence` (which must outlive it) from now on. Precondition:
  // the cache holds no entry.
  void set_presence(KeyPresence* presence);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_tokens() const { return block_tokens_; }
  int64_t free_blocks() const { return free_blocks_; }
  // Blocks held by unpinned prefix-cache entries (reclaimable by eviction).
  int64_t evictable_blocks() const { return evictable_blocks_; }
  // Blocks held by cache entries (pinned or not).
  int64_t cached_blocks() const { return cached_blocks_; }
  // Blocks owned by running sequences.
  int64_t owned_blocks() const { return num_blocks_ - free_blocks_ - cached_blocks_; }
  // Largest number of blocks that were not free at any time.
  int64_t high_water_blocks() const { return high_water_blocks_; }
  int64_t num_evictions() const { return num_evictions_; }

  // Blocks needed for `tokens` tokens (ceil).
  int64_t blocks_for_tokens(int64_t tokens) const {
    return (tokens + block_tokens_ - 1) / block_tokens_;
  }
  // True when `blocks` could be allocated now (counting evictable entries).
  bool can_allocate(int64_t blocks) const { return blocks <= free_blocks_ + evictable_blocks_; }
  // Allocates `blocks` to a sequence, evicting LRU entries as needed. Returns false and changes
  // nothing when impossible.
  bool allocate(int64_t blocks);
  // Returns blocks owned by a sequence to the free pool.
  void release(int64_t blocks);

  // Looks up consecutive keys from the start; pins and returns the number of leading keys found
  // (a prefix match stops at the first miss). `tick` marks them recently used.
  int64_t match_and_pin(std::span<const uint64_t> keys, uint64_t tick);
  // Looks up one key; pins it and returns its tokens when found, else 0.
  int64_t match_and_pin_one(uint64_t key, uint64_t tick);
  // Unpins keys pinned by match_and_pin / insert_pinned.
  void unpin(std::span<const uint64_t> keys, uint64_t tick);
  // Moves `blocks` blocks owned by a sequence into a new entry `key` of `tokens` tokens, pinned
  // once. Precondition: the key is absent.
  void insert_pinned(uint64_t key, int64_t blocks, int64_t tokens, uint64_t tick);
  // Moves `blocks` owned blocks into an unpinned entry (replacing an unpinned entry with the same
  // key, whose blocks are merged into it). Returns the entry's blocks.
  int64_t insert_unpinned_merge(uint64_t key, int64_t blocks, int64_t tokens, uint64_t tick);
  bool contains(uint64_t key) const { return entries_.count(key) > 0; }
  // Called with (key, blocks, tokens) of every entry eviction removes, in eviction order, before
  // its blocks are reused (a tiered KV cache demotes it, kv_tiers.h); none by default.
  using EvictionSink = std::function<void(uint64_t key, int64_t blocks, int64_t tokens)>;
  void set_eviction_sink(EvictionSink sink) { eviction_sink_ = std::move(sink); }
  int64_t entry_blocks(uint64_t key) const;
  // Blocks of the entries `keys` (present, checked) that are unpinned: counted as evictable by
  // can_allocate, they stop being so once pinned.
  int64_t unpinned_blocks(std::span<const uint64_t> keys) const;

 private:
  struct Entry {
    int64_t blocks = 0;
    int64_t tokens = 0;
    int32_t refs = 0;
    uint64_t tick = 0;
  };
  void pin(uint64_t key, Entry& e, uint64_t tick);
  void touch_high_water();
  bool evict_one();

  int64_t num_blocks_;
  int64_t block_tokens_;
  int64_t free_blocks_;
  int64_t evictable_blocks_ = 0;
  int64_t cached_blocks_ = 0;
  int64_t high_water_blocks_ = 0;
  int64_t num_evictions_ = 0;
  // Looked up by key only, never iterated (iteration order would not be deterministic).
  std::unordered_map<uint64_t, Entry> entries_;
  // Unpinned entries by (recency tick, key): the eviction order.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> lru_;
  EvictionSink eviction_sink_;
  KeyPresence* presence_ = nullptr;
  void add_presence(uint64_t key);
  void drop_presence(uint64_t key);
};

}  // namespace moesim::sim
