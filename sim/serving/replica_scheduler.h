// The replica scheduler: continuous batching of one model replica's sequences over its attention
// ranks. It owns the waiting queue, each rank's KV cache (paged blocks with a prefix cache), the
// token budgets of a step and the concurrency limits, and decides each step's batch: decode
// tokens (preempting by recompute when a rank runs out of blocks), the next prefill chunks, then
// first-come-first-served admissions to the rank with the most prefix hits, then the most room
// (docs/serving.md, "Replica scheduler"). schedule() returns a plain batch; the cluster reports
// back which sequences finished. The scheduler never reads a clock: `now` is passed in.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "sim/core/argmax_tree.h"
#include "sim/core/id_window.h"
#include "sim/core/time.h"
#include "sim/memory/kv_cache.h"
#include "sim/memory/kv_tiers.h"
#include "sim/memory/memory_layout.h"
#include "sim/scenario/deployment.h"
#include "sim/serving/sequence.h"
#include "sim/serving/step_model.h"

namespace moesim::sim {

// One step's work: (sequence id, slice) in batch order, and the same slices per attention rank
// (the step model's input).
struct ScheduledBatch {
  std::vector<std::pair<int32_t, SeqSlice>> seqs;
  std::vector<std::vector<SeqSlice>> ranks;
  bool empty() const { return seqs.empty(); }
  // New tokens over all slices.
  int64_t num_tokens() const;
};

// A load from the lower KV tiers that an admission started: the cluster wakes the replica at
// ready_ns and traces the span.
struct KvLoadStarted {
  int32_t sid = -1;
  int32_t rank = -1;
  SimTime start_ns = 0;
  SimTime ready_ns = 0;
  int64_t load_id = -1;  // KvLoad::id
};

// Totals over the run, for the run counters.
struct SchedulerTotals {
  int64_t prompt_tokens_total = 0;   // prompt tokens of first admissions (not decode-only)
  int64_t prompt_tokens_cached = 0;  // of which served by the prefix cache
  int64_t num_preemptions = 0;
};

class ReplicaScheduler {
 public:
  // `num_ranks` attention ranks with `layout`'s KV pool each; `seqs` is the cluster's sequence
  // table (it must outlive the scheduler).
  ReplicaScheduler(const SchedulerSpec& spec, int32_t num_ranks, const GpuMemoryLayout& layout,
                   IdWindow<Seq>* seqs);

  // Appends sequence `sid` to the waiting queue.
  void enqueue(int32_t sid) { waiting_.push_back(sid); }
  // Builds the next step's batch (empty when nothing can run). `now` stamps first admissions.
  const ScheduledBatch& schedule(SimTime now);
  // The batch of the last schedule().
  const ScheduledBatch& batch() const { return batch_; }

  // The sequence's prompt is fully prefilled at `now`: its full prefix blocks enter the rank's
  // cache (pinned while it runs), when prefix caching is on; with KV tiers writing through, the
  // new ones are also copied to the node's lower tiers.
  void finish_prefill(Seq& s, SimTime now);
  // The sequence completed and `next` turn of its session will re-use its context: the context's
  // full blocks stay cached (unpinned) for it, when prefix caching is on.
  void keep_for_next_turn(Seq& s, const Request& next);
  // Frees the sequence's blocks and takes it off its rank (it completed or moved to another
  // replica).
  void release(Seq& s);

  // Replaces the memory layout (routed experts replaced before the first step): new, empty KV
  // caches. Precondition (checked): nothing admitted yet.
  void reset_memory(const GpuMemoryLayout& layout);
  // Caps in-flight sequences and the step's total tokens; 0 keeps a limit as it is.
  void set_limits(int32_t max_seqs, int64_t max_step_tokens);
  // Speculative decoding (sim/serving/speculative.h): every decode slice verifies 1 + d tokens,
  // d = min(k, tokens still to produce - 1, the rank's budget left - 1) drafts, and reserves KV
  // for all of them. 0 (the default): one token per decode slice.
  void set_draft_tokens(int32_t num_draft_tokens) { num_draft_tokens_ = num_draft_tokens; }
  // After a speculative step committed tokens (s.generated advanced): frees the sequence's
  // trailing KV blocks beyond its valid tokens (prompt + generated - 1; the rejected drafts'),
  // keeping its state blocks. Returns the blocks freed.
  int64_t trim_to_committed(Seq& s);

  // Tiered KV cache (kv_tiers.h): `tiers` (owned by the cluster, outliving the scheduler) holds
  // the nodes' lower tiers; attention rank k has `gpus_per_rank` GPUs, the first global GPU
  // rank_gpus[k] on node rank_nodes[k]. Entries the ranks' HBM caches evict are demoted there;
  // a first admission matches its prefix in the rank's HBM, then continues in the node's lower
  // tiers, takes what it finds there into HBM (pinned, like HBM hits) and starts its prefill when
  // that load is ready. Call before the first schedule() (and again is harmless).
  void set_kv_tiers(KvTiers* tiers, std::vector<int32_t> rank_nodes, std::vector<int32_t> rank_gpus,
                    int32_t gpus_per_rank);
  // Loads the last schedule() started (cleared by the next).
  const std::vector<KvLoadStarted>& loads_started() const { return loads_; }
  // Cache-aware routing: the most leading prefix blocks of `req` that one rank could serve from
  // its HBM cache and (with tiers) its node's lower tiers; 0 without prefix caching.
  int64_t cached_prefix_blocks(const Request& req) const;
  // Prompt tokens still to prefill of the sequences waiting or running here.
  int64_t pending_prefill_tokens() const;

  int32_t num_ranks() const { return static_cast<int32_t>(ranks_.size()); }
  KvCache& kv(int32_t rank_idx) { return *ranks_[rank_idx].kv; }
  const KvCache& kv(int32_t rank_idx) const { return *ranks_[rank_idx].kv; }
  const GpuMemoryLayout& layout() const { return layout_; }
  int32_t num_in_flight() const { return num_in_flight_; }
  size_t num_waiting() const { return waiting_.size(); }
  const SchedulerTotals& totals() const { return totals_; }

 private:
  struct Rank {
    std::unique_ptr<KvCache> kv;
    std::vector<int32_t> running;  // sequence ids in admission order
  };
  void add_decode_tokens();
  void drop_preempted_slices();
  void add_prefill_chunks(SimTime now);
  void admit_waiting(SimTime now);
  bool try_admit(int32_t sid, SimTime now);
  // A rank's room for admission: its free and evictable blocks less 4 per running sequence (the
  // larger wins, the first rank on a tie).
  int64_t admit_room(const Rank& rank) const {
    return rank.kv->free_blocks() + rank.kv->evictable_blocks() -
           static_cast<int64_t>(rank.running.size()) * 4;
  }
  // admit_tree_'s key of rank k: its room where its budget takes tokens, else ArgMaxTree::kNone.
  int64_t admit_key(int32_t k) const {
    return budget_[k] > 0 ? admit_room(ranks_[k]) : ArgMaxTree::kNone;
  }
  // KV for the sequence's context and its `verify_tokens` new tokens (allocating, else
  // preempting); false when the sequence itself was preempted.
  bool ensure_decode_capacity(int32_t rank_idx, int32_t sid, int64_t verify_tokens = 1);
  // Tokens the next decode slice of `s` verifies: 1 + drafts (set_draft_tokens), at most
  // `budget_tokens` (>= 1).
  int64_t verify_tokens(const Seq& s, int64_t budget_tokens) const;
  void preempt(int32_t sid);
  // Whether admitting `s` looks its prompt's prefix blocks up (prefix caching on, a sequence
  // prefilled here, at its first admission).
  bool looks_up_prefix(const Seq& s) const {
    return spec_.prefix_caching && !s.decode_only && !s.first_admission_done;
  }
  int64_t hits_on(const Rank& rank, const Seq& s) const;
  // Leading prefix blocks of `s` after its `hbm_hits` HBM hits held by rank k's node's lower
  // tiers (0 without tiers or when hits_on would not look).
  int64_t lower_hits_on(int32_t k, const Seq& s, int64_t hbm_hits) const;
  // Full prefix blocks (512 tokens) of a prompt a match may cover: one token is always computed.
  static int64_t max_prefix_blocks(const Request& req);
  // Keys h[from..) up to max_blocks that rank k's node's lower tiers hold, stopping at the first
  // one they do not hold or that rank k's HBM holds.
  int64_t lower_run(int32_t k, const std::vector<uint64_t>& h, int64_t from,
                    int64_t max_blocks) const;
  void install_eviction_sinks();
  // Bytes of one prefix entry (512 tokens) on one GPU.
  int64_t entry_bytes_per_gpu() const;
  int64_t blocks_per_prefix() const;
  void push(int32_t sid, int32_t rank_idx, SeqSlice slice);
  void consume(int32_t rank_idx, int64_t n);

  SchedulerSpec spec_;
  GpuMemoryLayout layout_;
  IdWindow<Seq>& seqs_;
  // Every rank's cached keys, counted (KvCache::set_presence; on the heap: a stable address).
  std::unique_ptr<KeyPresence> presence_ = std::make_unique<KeyPresence>();
  std::vector<Rank> ranks_;
  std::deque<int32_t> waiting_;
  int32_t num_in_flight_ = 0;
  int32_t max_seqs_ = 0;
  int64_t max_step_tokens_ = 0;   // 0 = no cap beyond the per-rank budgets
  int32_t num_draft_tokens_ = 0;  // speculative decoding's k; 0 = off
  uint64_t admit_counter_ = 0;
  uint64_t lru_tick_ = 0;
  SchedulerTotals totals_;
  KvTiers* tiers_ = nullptr;
  std::vector<int32_t> rank_nodes_, rank_gpus_;
  int32_t gpus_per_rank_ = 1;
  std::vector<KvLoadStarted> loads_;
  SimTime now_ = 0;  // the last schedule()'s time: stamps demotions (allocations happen there)
  // Per step.
  ScheduledBatch batch_;
  std::vector<int32_t> decode_snapshot_;        // add_decode_tokens' copy of a rank's running list
  bool preempted_this_step_ = false;            // schedule() preempted a sequence
  static constexpr size_t kPrefetchAhead = 16;  // sequences prefetched ahead in per-rank loops
  std::vector<int64_t> budget_;  // per rank, before the step cap: read through budget()
  int64_t step_tokens_left_ = 0;
  // admit_waiting()'s ranks by admit_key(): built at its first admission that can use it (one
  // that no prefix can hit and that takes a budget), then kept by re-keying the rank each
  // admission changed (only that rank's cache, running list and budget change), so choosing the
  // rank of most room costs log(ranks), not ranks. Valid while admit_tree_built_.
  ArgMaxTree admit_tree_;
  bool admit_tree_built_ = false;
  // Tokens rank k may still take this step: its budget, at most the step's tokens left.
  int64_t budget(int32_t k) const { return std::min(budget_[k], step_tokens_left_); }
};

}  // namespace moesim::sim
