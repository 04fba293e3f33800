#include "sim/memory/kv_cache.h"

#include <algorithm>

#include "base/check.h"

namespace moesim::sim {

KvCache::KvCache(int64_t num_blocks, int64_t block_tokens)
    : num_blocks_(num_blocks), block_tokens_(block_tokens), free_blocks_(num_blocks) {
  MOESIM_CHECK(num_blocks >= 0 && block_tokens > 0, "bad KV cache size");
}

void KvCache::set_presence(KeyPresence* presence) {
  MOESIM_CHECK(entries_.empty(), "presence counting set on a cache that holds entries");
  presence_ = presence;
}

void KvCache::add_presence(uint64_t key) {
  if (presence_) ++(*presence_)[key];
}

void KvCache::drop_presence(uint64_t key) {
  if (!presence_) return;
  auto it = presence_->find(key);
  MOESIM_CHECK(it != presence_->end() && it->second > 0, "presence count of an absent key");
  if (--it->second == 0) presence_->erase(it);
}

void KvCache::touch_high_water() {
  high_water_blocks_ = std::max(high_water_blocks_, num_blocks_ - free_blocks_);
}

bool KvCache::evict_one() {
  if (lru_.empty()) return false;
  auto it = lru_.begin();
  uint64_t key = it->second;
  lru_.erase(it);
  auto e = entries_.find(key);
  MOESIM_CHECK(e != entries_.end() && e->second.refs == 0, "LRU holds a pinned entry");
  free_blocks_ += e->second.blocks;
  evictable_blocks_ -= e->second.blocks;
  cached_blocks_ -= e->second.blocks;
  if (eviction_sink_) eviction_sink_(key, e->second.blocks, e->second.tokens);
  entries_.erase(e);
  drop_presence(key);
  ++num_evictions_;
  return true;
}

bool KvCache::allocate(int64_t blocks) {
  MOESIM_CHECK(blocks >= 0, "negative allocation");
  if (!can_allocate(blocks)) return false;
  while (free_blocks_ < blocks) {
    MOESIM_CHECK(evict_one(), "evictable blocks miscounted");
  }
  free_blocks_ -= blocks;
  touch_high_water();
  return true;
}

void KvCache::release(int64_t blocks) {
  MOESIM_CHECK(blocks >= 0 && blocks <= owned_blocks(), "releasing blocks not owned");
  free_blocks_ += blocks;
}

void KvCache::pin(uint64_t key, Entry& e, uint64_t tick) {
  if (e.refs == 0) {
    lru_.erase({e.tick, key});
    evictable_blocks_ -= e.blocks;
  }
  ++e.refs;
  e.tick = tick;
}

int64_t KvCache::match_and_pin(std::span<const uint64_t> keys, uint64_t tick) {
  int64_t n = 0;
  for (uint64_t key : keys) {
    auto it = entries_.find(key);
    if (it == entries_.end()) break;
    pin(key, it->second, tick);
    ++n;
  }
  return n;
}

int64_t KvCache::match_and_pin_one(uint64_t key, uint64_t tick) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return 0;
  pin(key, it->second, tick);
  return it->second.tokens;
}

void KvCache::unpin(std::span<const uint64_t> keys, uint64_t tick) {
  for (uint64_t key : keys) {
    auto it = entries_.find(key);
    MOESIM_CHECK(it != entries_.end() && it->second.refs > 0, "unpinning an unpinned entry");
    Entry& e = it->second;
    if (--e.refs == 0) {
      e.tick = tick;
      lru_.emplace(std::make_pair(e.tick, key), key);
      evictable_blocks_ += e.blocks;
    }
  }
}

void KvCache::insert_pinned(uint64_t key, int64_t blocks, int64_t tokens, uint64_t tick) {
  MOESIM_CHECK(!entries_.count(key), "inserting an existing key");
  MOESIM_CHECK(blocks <= owned_blocks(), "inserting blocks not owned");
  entries_.emplace(key, Entry{blocks, tokens, 1, tick});
  add_presence(key);
  cached_blocks_ += blocks;
}

int64_t KvCache::insert_unpinned_merge(uint64_t key, int64_t blocks, int64_t tokens,
                                       uint64_t tick) {
  MOESIM_CHECK(blocks <= owned_blocks(), "inserting blocks not owned");
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    MOESIM_CHECK(it->second.refs == 0, "merging into a pinned entry");
    lru_.erase({it->second.tick, key});
    evictable_blocks_ -= it->second.blocks;
    blocks += it->second.blocks;
    cached_blocks_ -= it->second.blocks;
    entries_.erase(it);
  } else {
    add_presence(key);  // a merged entry keeps its key
  }
  entries_.emplace(key, Entry{blocks, tokens, 0, tick});
  lru_.emplace(std::make_pair(tick, key), key);
  cached_blocks_ += blocks;
  evictable_blocks_ += blocks;
  return blocks;
}

int64_t KvCache::unpinned_blocks(std::span<const uint64_t> keys) const {
  int64_t n = 0;
  for (uint64_t key : keys) {
    auto it = entries_.find(key);
    MOESIM_CHECK(it != entries_.end(), "counting an absent entry");
    if (it->second.refs == 0) n += it->second.blocks;
  }
  return n;
}

int64_t KvCache::entry_blocks(uint64_t key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.blocks;
}

}  // namespace moesim::sim
