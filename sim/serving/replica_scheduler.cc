#include "sim/serving/replica_scheduler.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <utility>

#include "base/check.h"
#include "sim/serving/speculative.h"

namespace moesim::sim {

int64_t ScheduledBatch::num_tokens() const {
  int64_t n = 0;
  for (const auto& [sid, sl] : seqs) n += sl.new_tokens;
  return n;
}

ReplicaScheduler::ReplicaScheduler(const SchedulerSpec& spec, int32_t num_ranks,
                                   const GpuMemoryLayout& layout, IdWindow<Seq>* seqs)
    : spec_(spec), layout_(layout), seqs_(*seqs), max_seqs_(spec.max_seqs) {
  MOESIM_CHECK(num_ranks >= 1, "a replica has attention ranks");
  for (int32_t k = 0; k < num_ranks; ++k) {
    ranks_.push_back(
        Rank{std::make_unique<KvCache>(layout.num_kv_blocks, spec.kv_block_tokens), {}});
    ranks_.back().kv->set_presence(presence_.get());
  }
}

int64_t ReplicaScheduler::blocks_per_prefix() const {
  return kPrefixBlockTokens / spec_.kv_block_tokens;
}

void ReplicaScheduler::reset_memory(const GpuMemoryLayout& layout) {
  MOESIM_CHECK(num_in_flight_ == 0 && admit_counter_ == 0, "memory reset before any admission");
  layout_ = layout;
  presence_->clear();
  for (Rank& rank : ranks_) {
    rank.kv = std::make_unique<KvCache>(layout.num_kv_blocks, spec_.kv_block_tokens);
    rank.kv->set_presence(presence_.get());
  }
  install_eviction_sinks();
}

void ReplicaScheduler::set_kv_tiers(KvTiers* tiers, std::vector<int32_t> rank_nodes,
                                    std::vector<int32_t> rank_gpus, int32_t gpus_per_rank) {
  MOESIM_CHECK(static_cast<int32_t>(rank_nodes.size()) == num_ranks() &&
                   static_cast<int32_t>(rank_gpus.size()) == num_ranks() && gpus_per_rank >= 1,
               "KV tiers need every rank's node and GPU");
  tiers_ = tiers;
  rank_nodes_ = std::move(rank_nodes);
  rank_gpus_ = std::move(rank_gpus);
  gpus_per_rank_ = gpus_per_rank;
  install_eviction_sinks();
}

void ReplicaScheduler::install_eviction_sinks() {
  if (!tiers_) return;
  for (int32_t k = 0; k < num_ranks(); ++k) {
    ranks_[k].kv->set_eviction_sink([this, k](uint64_t key, int64_t blocks, int64_t tokens) {
      MOESIM_CHECK(blocks == blocks_per_prefix() && tokens == kPrefixBlockTokens,
                   "HBM cache entries are prefix blocks");
      tiers_->demote_from_hbm(rank_nodes_[k], rank_gpus_[k], key, entry_bytes_per_gpu(),
                              gpus_per_rank_, now_);
    });
  }
}

int64_t ReplicaScheduler::entry_bytes_per_gpu() const {
  return std::llround(layout_.kv_block_bytes * static_cast<double>(blocks_per_prefix()));
}

void ReplicaScheduler::set_limits(int32_t max_seqs, int64_t max_step_tokens) {
  if (max_seqs > 0) max_seqs_ = max_seqs;
  if (max_step_tokens > 0) max_step_tokens_ = max_step_tokens;
}

void ReplicaScheduler::consume(int32_t rank_idx, int64_t n) {
  // budget(k) clamps to the step's tokens left when read: clamping every rank's budget here made
  // each consumed token cost O(ranks).
  budget_[rank_idx] -= n;
  step_tokens_left_ -= n;
}

void ReplicaScheduler::push(int32_t sid, int32_t rank_idx, SeqSlice slice) {
  batch_.ranks[rank_idx].push_back(slice);
  batch_.seqs.emplace_back(sid, slice);
}

const ScheduledBatch& ReplicaScheduler::schedule(SimTime now) {
  now_ = now;
  budget_.assign(ranks_.size(), spec_.max_batch_tokens_per_gpu);
  step_tokens_left_ = max_step_tokens_ > 0 ? max_step_tokens_ : INT64_MAX;
  batch_.ranks.resize(ranks_.size());
  for (std::vector<SeqSlice>& slices : batch_.ranks) slices.clear();  // keeps their storage
  batch_.seqs.clear();
  preempted_this_step_ = false;
  add_decode_tokens();
  drop_preempted_slices();
  loads_.clear();
  add_prefill_chunks(now);
  admit_waiting(now);
  return batch_;
}

void ReplicaScheduler::add_decode_tokens() {
  for (int32_t k = 0; k < num_ranks(); ++k) {
    // A copy: preemption takes sequences off the running list.
    decode_snapshot_ = ranks_[k].running;
    for (size_t i = 0; i < decode_snapshot_.size(); ++i) {
      if (i + kPrefetchAhead < decode_snapshot_.size()) {
        seqs_.prefetch(decode_snapshot_[i + kPrefetchAhead], 64);
      }
      const int32_t sid = decode_snapshot_[i];
      const Seq& s = seqs_[sid];
      if (!s.running || s.prefilled < s.prefill_target) continue;
      if (budget(k) <= 0) break;
      const int64_t n = verify_tokens(s, budget(k));
      if (!ensure_decode_capacity(k, sid, n)) continue;
      consume(k, n);
      push(sid, k, SeqSlice{n, s.req.prompt_tokens + s.generated - 1, false});
    }
  }
}

void ReplicaScheduler::drop_preempted_slices() {
  // Preemption may have evicted a sequence already in the batch: drop those.
  if (!preempted_this_step_) return;
  std::vector<std::pair<int32_t, SeqSlice>> kept;
  for (const auto& [sid, sl] : batch_.seqs) {
    if (seqs_[sid].running) kept.emplace_back(sid, sl);
  }
  if (kept.size() == batch_.seqs.size()) return;
  batch_.seqs = std::move(kept);
  batch_.ranks.assign(ranks_.size(), {});
  for (const auto& [sid, sl] : batch_.seqs) batch_.ranks[seqs_[sid].rank].push_back(sl);
}

void ReplicaScheduler::add_prefill_chunks(SimTime now) {
  for (int32_t k = 0; k < num_ranks(); ++k) {
    for (int32_t sid : ranks_[k].running) {
      const Seq& s = seqs_[sid];
      if (s.prefilled >= s.prefill_target || budget(k) <= 0) continue;
      if (s.kv_ready_ns > now) continue;  // its prefix is still loading from a lower tier
      const int64_t chunk = std::min(s.prefill_target - s.prefilled, budget(k));
      consume(k, chunk);
      push(sid, k, SeqSlice{chunk, s.prefilled, true});
    }
  }
}

void ReplicaScheduler::admit_waiting(SimTime now) {
  admit_tree_built_ = false;  // the ranks changed since the last step's admissions
  while (!waiting_.empty() && num_in_flight_ < max_seqs_) {
    const int32_t sid = waiting_.front();
    if (!try_admit(sid, now)) break;
    waiting_.pop_front();
    const Seq& s = seqs_[sid];
    const int32_t rank_idx = s.rank;
    if (s.prefilled >= s.prefill_target) {
      // KV arrived from a prefill replica: decode right away.
      const int64_t n = verify_tokens(s, INT64_MAX);
      if (ensure_decode_capacity(s.rank, sid, n)) {
        push(sid, s.rank, SeqSlice{n, s.req.prompt_tokens + s.generated - 1, false});
      }
    }
    // The admission (and a preemption it caused) changed this rank only.
    if (admit_tree_built_) admit_tree_.update(rank_idx, admit_key(rank_idx));
  }
}

int64_t ReplicaScheduler::hits_on(const Rank& rank, const Seq& s) const {
  if (!looks_up_prefix(s)) return 0;
  const auto& h = s.req.prefix_block_hashes;
  // At least one prompt token is always computed: at most (prompt - 1) / 512 full blocks hit.
  const int64_t max_blocks = (s.req.prompt_tokens - 1) / kPrefixBlockTokens;
  int64_t n = 0;
  while (n < max_blocks && n < static_cast<int64_t>(h.size()) && rank.kv->contains(h[n])) ++n;
  return n;
}

int64_t ReplicaScheduler::max_prefix_blocks(const Request& req) {
  return std::max<int64_t>(0,
                           std::min<int64_t>((req.prompt_tokens - 1) / kPrefixBlockTokens,
                                             static_cast<int64_t>(req.prefix_block_hashes.size())));
}

int64_t ReplicaScheduler::lower_hits_on(int32_t k, const Seq& s, int64_t hbm_hits) const {
  if (!tiers_ || !looks_up_prefix(s)) return 0;
  const int64_t max_blocks = max_prefix_blocks(s.req);
  return lower_run(k, s.req.prefix_block_hashes, hbm_hits, max_blocks);
}

int64_t ReplicaScheduler::lower_run(int32_t k, const std::vector<uint64_t>& h, int64_t from,
                                    int64_t max_blocks) const {
  // A key this rank's HBM holds ends the run too: it cannot be loaded a second time.
  int64_t n = from;
  while (n < max_blocks && !ranks_[k].kv->contains(h[n]) && tiers_->tier_of(rank_nodes_[k], h[n])) {
    ++n;
  }
  return n - from;
}

int64_t ReplicaScheduler::cached_prefix_blocks(const Request& req) const {
  if (!spec_.prefix_caching) return 0;
  const int64_t max_blocks = max_prefix_blocks(req);
  const auto& h = req.prefix_block_hashes;
  int64_t best = 0;
  for (int32_t k = 0; k < num_ranks(); ++k) {
    int64_t n = 0;
    while (n < max_blocks && ranks_[k].kv->contains(h[n])) ++n;
    if (tiers_) n += lower_run(k, h, n, max_blocks);
    best = std::max(best, n);
  }
  return best;
}

int64_t ReplicaScheduler::pending_prefill_tokens() const {
  int64_t n = 0;
  for (int32_t sid : waiting_) n += seqs_[sid].prefill_target - seqs_[sid].prefilled;
  for (const Rank& rank : ranks_) {
    for (int32_t sid : rank.running) n += seqs_[sid].prefill_target - seqs_[sid].prefilled;
  }
  return n;
}

bool ReplicaScheduler::try_admit(int32_t sid, SimTime now) {
  Seq& s = seqs_[sid];
  int32_t best = -1;
  int64_t best_hits = -1, best_room = 0, best_need = 0, best_lower = 0, best_total = -1;
  // hits_on() and lower_hits_on() are 0 on every rank where no prefix block can hit (a prompt of
  // at most one block, or no lookup for this sequence): asked once, not per rank.
  const bool may_hit = looks_up_prefix(s) && max_prefix_blocks(s.req) > 0;
  // No rank's HBM holds the first block (presence_ counts every rank's keys): no rank hits.
  const bool may_hit_hbm = may_hit && presence_->count(s.req.prefix_block_hashes[0]) > 0;
  const int64_t per_prefix = blocks_per_prefix();
  // Every rank's cache has the spec's block size (the constructor and reset_memory build them).
  const int64_t prompt_blocks = ranks_[0].kv->blocks_for_tokens(s.prefill_target);
  if (!may_hit && !s.decode_only && step_tokens_left_ > 0) {
    // No rank can hit a prefix, so every rank needs the same blocks: the scan below would pick
    // the first rank of most room among those whose budget takes tokens, if it can allocate
    // them (a rank of less room is never chosen over it). admit_tree_ has that rank.
    if (!admit_tree_built_) {
      admit_tree_.build(num_ranks(), [this](int32_t k) { return admit_key(k); });
      admit_tree_built_ = true;
    }
    const int32_t k = admit_tree_.first_max();
    const int64_t need = blocks_for_sequence(layout_, s.prefill_target, spec_.kv_block_tokens);
    if (admit_tree_.key(k) != ArgMaxTree::kNone && ranks_[k].kv->can_allocate(need)) {
      best = k;
      best_hits = best_lower = 0;
      best_need = need;
    }
  }
  // Otherwise (or where that rank cannot allocate them) every rank is asked.
  if (best < 0) {
    for (int32_t k = 0; k < num_ranks(); ++k) {
      if (budget(k) <= 0 && !s.decode_only) continue;
      const Rank& rank = ranks_[k];
      const int64_t hits = may_hit_hbm ? hits_on(rank, s) : 0;
      // Prefix blocks a lower KV tier of the rank's node holds (0 without tiers): loaded into HBM.
      const int64_t lower = may_hit ? lower_hits_on(k, s, hits) : 0;
      const int64_t total = hits + lower;
      const int64_t need = prompt_blocks - total * per_prefix + layout_.state_blocks_per_sequence;
      // Pinning the HBM hits takes their blocks out of the evictable ones can_allocate counts.
      const int64_t pinned_now =
          hits > 0 ? rank.kv->unpinned_blocks(std::span<const uint64_t>(
                         s.req.prefix_block_hashes.data(), static_cast<size_t>(hits)))
                   : 0;
      if (!rank.kv->can_allocate(need + lower * per_prefix + pinned_now)) continue;
      const int64_t room = admit_room(rank);
      if (total > best_total || (total == best_total && room > best_room)) {
        best = k;
        best_hits = hits;
        best_lower = lower;
        best_total = total;
        best_room = room;
        best_need = need;
      }
    }
  }
  if (best < 0) return false;
  Rank& rank = ranks_[best];
  const auto& h = s.req.prefix_block_hashes;
  if (best_hits > 0) {
    const int64_t pinned =
        rank.kv->match_and_pin(std::span<const uint64_t>(h.data(), best_hits), ++lru_tick_);
    MOESIM_CHECK(pinned == best_hits, "prefix hits changed during admission");
  }
  MOESIM_CHECK(rank.kv->can_allocate(best_need + best_lower * blocks_per_prefix()),
               "admission room changed by pinning its hits");
  if (tiers_ && looks_up_prefix(s)) {
    KvTierCounters& c = tiers_->counters();
    c.lookup_blocks += max_prefix_blocks(s.req);
    c.hit_blocks[0] += best_hits;
  }
  if (best_lower > 0) {
    // Take the entries out of the lower tiers first (exclusive tiers), then place them in HBM:
    // the allocation may evict and demote other entries.
    const std::span<const uint64_t> keys(h.data() + best_hits, static_cast<size_t>(best_lower));
    const KvLoad load = tiers_->load(rank_nodes_[best], rank_gpus_[best], keys,
                                     entry_bytes_per_gpu(), gpus_per_rank_, now);
    for (uint64_t key : keys) {
      MOESIM_CHECK(rank.kv->allocate(blocks_per_prefix()), "load allocation failed after check");
      rank.kv->insert_pinned(key, blocks_per_prefix(), kPrefixBlockTokens, ++lru_tick_);
    }
    s.kv_ready_ns = load.ready_ns;
    s.kv_load_ns = load.ready_ns - now;
    s.kv_load_id = load.id;
    s.loaded_prompt_tokens = best_lower * kPrefixBlockTokens;
    loads_.push_back(KvLoadStarted{sid, best, now, load.ready_ns, load.id});
    best_hits += best_lower;
  }
  MOESIM_CHECK(rank.kv->allocate(best_need), "admission allocation failed after check");
  s.rank = best;
  s.running = true;
  s.admit_order = ++admit_counter_;
  s.owned_blocks = best_need;
  s.num_hit_blocks = best_hits;
  s.num_inserted_blocks = 0;
  s.capacity_tokens = (best_need - layout_.state_blocks_per_sequence) * spec_.kv_block_tokens +
                      best_hits * kPrefixBlockTokens;
  if (!s.first_admission_done) {
    s.first_admission_done = true;
    if (!s.decode_only) {
      totals_.prompt_tokens_total += s.req.prompt_tokens;
      totals_.prompt_tokens_cached += best_hits * kPrefixBlockTokens;
      s.cached_prompt_tokens = best_hits * kPrefixBlockTokens;
    }
    if (s.first_scheduled_ns < 0) s.first_scheduled_ns = now;
  }
  if (!s.decode_only) s.prefilled = best_hits * kPrefixBlockTokens;
  rank.running.push_back(sid);
  num_in_flight_++;
  if (s.prefilled < s.prefill_target && s.kv_ready_ns <= now) {
    const int64_t chunk = std::min(s.prefill_target - s.prefilled, budget(best));
    consume(best, chunk);
    push(sid, best, SeqSlice{chunk, s.prefilled, true});
  }
  return true;
}

int64_t ReplicaScheduler::verify_tokens(const Seq& s, int64_t budget_tokens) const {
  if (num_draft_tokens_ == 0) return 1;
  const int64_t drafts = drafts_for(num_draft_tokens_, s.req.output_tokens - s.generated);
  return std::min(1 + drafts, budget_tokens);
}

bool ReplicaScheduler::ensure_decode_capacity(int32_t rank_idx, int32_t sid,
                                              int64_t verify_tokens) {
  Rank& rank = ranks_[rank_idx];
  Seq& s = seqs_[sid];
  const int64_t needed_tokens = s.req.prompt_tokens + s.generated + verify_tokens - 1;
  while (s.capacity_tokens < needed_tokens) {
    if (rank.kv->allocate(1)) {
      s.owned_blocks++;
      s.capacity_tokens += spec_.kv_block_tokens;
      continue;
    }
    // Out of blocks: preempt the most recently admitted sequence of this rank, the running
    // list's last (it is in admission order: admission appends, release keeps the order).
    const int32_t victim = rank.running.back();
    MOESIM_CHECK(seqs_[victim].admit_order >= s.admit_order, "running list out of admission order");
    preempt(victim);
    if (victim == sid) return false;
  }
  return true;
}

void ReplicaScheduler::preempt(int32_t sid) {
  Seq& s = seqs_[sid];
  release(s);
  s.prefilled = 0;
  s.decode_only = false;
  s.prefill_target = s.req.prompt_tokens + s.generated;  // recompute everything
  s.kv_ready_ns = 0;
  s.kv_load_id = -1;
  s.rank = -1;
  waiting_.push_front(sid);
  preempted_this_step_ = true;
  s.num_preemptions++;
  totals_.num_preemptions++;
}

void ReplicaScheduler::release(Seq& s) {
  Rank& rank = ranks_[s.rank];
  const auto& h = s.req.prefix_block_hashes;
  if (s.num_hit_blocks + s.num_inserted_blocks > 0) {
    rank.kv->unpin(std::span<const uint64_t>(h.data(), s.num_hit_blocks + s.num_inserted_blocks),
                   ++lru_tick_);
  }
  rank.kv->release(s.owned_blocks);
  s.owned_blocks = 0;
  s.num_hit_blocks = s.num_inserted_blocks = 0;
  s.capacity_tokens = 0;
  auto it = std::find(rank.running.begin(), rank.running.end(), s.sid);
  MOESIM_CHECK(it != rank.running.end(), "sequence not running on its rank");
  rank.running.erase(it);
  num_in_flight_--;
  s.running = false;
}

int64_t ReplicaScheduler::trim_to_committed(Seq& s) {
  MOESIM_CHECK(s.running, "trimming a sequence that does not run");
  const int64_t valid_tokens = s.req.prompt_tokens + s.generated - 1;
  const int64_t block = spec_.kv_block_tokens;
  int64_t freed = 0;
  while (s.capacity_tokens - block >= valid_tokens &&
         s.owned_blocks > layout_.state_blocks_per_sequence) {
    s.owned_blocks--;
    s.capacity_tokens -= block;
    freed++;
  }
  if (freed > 0) ranks_[s.rank].kv->release(freed);
  return freed;
}

void ReplicaScheduler::finish_prefill(Seq& s, SimTime now) {
  // Ownership of the prompt's full prefix blocks moves from the sequence to pinned cache
  // entries, so later requests with the same prefix re-use them.
  if (!spec_.prefix_caching) return;
  Rank& rank = ranks_[s.rank];
  const auto& h = s.req.prefix_block_hashes;
  const int64_t full =
      std::min<int64_t>(s.req.prompt_tokens / kPrefixBlockTokens, static_cast<int64_t>(h.size()));
  int64_t next = s.num_hit_blocks + s.num_inserted_blocks;
  while (next < full && !rank.kv->contains(h[next]) &&
         s.owned_blocks >= blocks_per_prefix() + layout_.state_blocks_per_sequence) {
    rank.kv->insert_pinned(h[next], blocks_per_prefix(), kPrefixBlockTokens, ++lru_tick_);
    if (tiers_ && tiers_->writes_through()) {
      tiers_->write_through(rank_nodes_[s.rank], rank_gpus_[s.rank], h[next], entry_bytes_per_gpu(),
                            gpus_per_rank_, now);
    }
    s.owned_blocks -= blocks_per_prefix();
    s.num_inserted_blocks++;
    next++;
  }
}

void ReplicaScheduler::keep_for_next_turn(Seq& s, const Request& next) {
  if (!spec_.prefix_caching) return;
  Rank& rank = ranks_[s.rank];
  const int64_t reuse_blocks =
      std::min<int64_t>(next.reused_prefix_tokens / kPrefixBlockTokens,
                        static_cast<int64_t>(next.prefix_block_hashes.size()));
  for (int64_t b = 0; b < reuse_blocks; ++b) {
    const uint64_t key = next.prefix_block_hashes[b];
    if (rank.kv->contains(key)) continue;
    if (s.owned_blocks - layout_.state_blocks_per_sequence < blocks_per_prefix()) break;
    rank.kv->insert_unpinned_merge(key, blocks_per_prefix(), kPrefixBlockTokens, ++lru_tick_);
    s.owned_blocks -= blocks_per_prefix();
  }
}

}  // namespace moesim::sim
