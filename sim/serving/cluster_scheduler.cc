// ClusterSim's request path and step lifecycle: arrivals, admission (policies, limits) and
// routing to pools and replicas; the continuous-batching scheduler (decode, chunked prefill,
// memory-aware admission with prefix caching, preemption by recompute); step completion, P/D KV
// transfers and the per-step policy hooks.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/check.h"
#include "sim/routing/synthetic_routing.h"
#include "sim/serving/cluster_sim.h"
#include "sim/serving/step_recorder.h"

namespace moesim::sim::detail {

void ClusterSim::schedule_next_open_loop() {
  std::optional<Request> req = workload_->next();
  if (!req) return;
  int64_t key = next_pending_key_++;
  SimTime at = req->arrival_ns;
  pending_.emplace(key, std::move(*req));
  // Open-loop arrivals carry id1 = 1 so that the next one is pulled when this one happens.
  sim_.schedule_at(std::max(at, sim_.now()), k_arrival_, key, 1);
}

void ClusterSim::on_arrival(const Event& e) {
  auto it = pending_.find(e.id0);
  MOESIM_CHECK(it != pending_.end(), "arrival of an unknown request");
  Request req = std::move(it->second);
  pending_.erase(it);
  if (e.id1 == 1) schedule_next_open_loop();
  admit_request(std::move(req));
}

void ClusterSim::reject(int32_t sid, const std::string& reason) {
  RequestRecord& rec = records_[sid];
  rec.outcome = RequestOutcome::kRejected;
  rec.reject_reason = reason;
  rec.done_ns = -1;
  counters_.actions["reject:" + reason]++;
  if (seqs_[sid].req.session.valid()) workload_->abandon_session(seqs_[sid].req.session);
}

int32_t ClusterSim::pick_replica(const Request& req, bool decode_pool, const std::string& pool) {
  const DeploymentSpec& d = sc_.deployment;
  int32_t lo = 0, hi = d.num_replicas;
  if (d.prefill_replicas > 0) {
    lo = decode_pool ? d.prefill_replicas : 0;
    hi = decode_pool ? d.num_replicas : d.prefill_replicas;
  } else {
    const Pool* p = &pools_.front();
    for (const Pool& q : pools_) {
      if (q.name == pool) p = &q;
    }
    lo = p->first;
    hi = p->last;
  }
  int32_t n = hi - lo;
  if (sc_.scheduler.router == RouterPolicy::kRoundRobin) {
    return lo + (rr_next_++ % n);
  }
  if (sc_.scheduler.router == RouterPolicy::kSessionAffinity && req.session.valid() &&
      !decode_pool) {
    auto it = session_replica_.find(req.session.value);
    if (it != session_replica_.end()) return it->second;
  }
  int32_t best = lo;
  for (int32_t i = lo + 1; i < hi; ++i) {
    if (replicas_[i].outstanding < replicas_[best].outstanding) best = i;
  }
  if (sc_.scheduler.router == RouterPolicy::kSessionAffinity && req.session.valid() &&
      !decode_pool) {
    session_replica_[req.session.value] = best;
  }
  return best;
}

void ClusterSim::admit_request(Request req) {
  AdmissionDecision decision;
  for (auto& p : policies_) {
    p->on_arrival(*this, req, decision);
    if (decision.reject) break;
  }
  int32_t sid = static_cast<int32_t>(seqs_.size());
  Seq s;
  s.req = std::move(req);
  s.prefill_target = s.req.prompt_tokens + decision.extra_prefill_tokens;
  seqs_.push_back(std::move(s));
  RequestRecord rec;
  const Request& r = seqs_[sid].req;
  rec.request_id = r.id.value;
  rec.session_id = r.session.valid() ? r.session.value : -1;
  rec.turn_idx = r.turn_idx;
  rec.attempt_idx = r.attempt_idx;
  rec.domain = std::string(domain_name(r.domain));
  rec.arrival_ns = sim_.now();
  rec.prompt_tokens = r.prompt_tokens;
  rec.output_tokens = r.output_tokens;
  records_.push_back(rec);
  if (r.attempt_idx > 0) counters_.actions["rollback_reissue"]++;
  if (decision.reject) {
    reject(sid, decision.reject_reason);
    return;
  }
  const int64_t total = seqs_[sid].prefill_target + r.output_tokens;
  if (r.prompt_tokens + r.output_tokens > card_.max_context_tokens) {
    reject(sid, "context_too_long");
    return;
  }
  const GpuMemoryLayout& lay = replicas_[0].layout;
  const int64_t need = (total + sc_.scheduler.kv_block_tokens - 1) / sc_.scheduler.kv_block_tokens +
                       lay.state_blocks_per_sequence;
  if (need > lay.num_kv_blocks) {
    reject(sid, "kv_capacity");
    return;
  }
  if (decision.delay_ns > 0) {
    delayed_.emplace(sid, decision.pool);
    sim_.schedule_after(decision.delay_ns, k_delayed_, sid);
    return;
  }
  route_seq(sid, decision.pool);
}

void ClusterSim::route_seq(int32_t sid, const std::string& pool) {
  int32_t ri = pick_replica(seqs_[sid].req, false, pool);
  Replica& rep = replicas_[ri];
  seqs_[sid].replica = ri;
  records_[sid].replica = ri;
  rep.outstanding++;
  rep.waiting.push_back(sid);
  try_start_step(rep);
}

void ClusterSim::after_step_policies(Replica& r, int64_t step_idx, int64_t step_tokens) {
  // Finished background transfers.
  for (size_t i = 0; i < r.transfers.size();) {
    if (r.transfers[i].remaining_total() <= 0) {
      int64_t id = r.transfers[i].id;
      r.transfers.erase(r.transfers.begin() + static_cast<std::ptrdiff_t>(i));
      ServingPolicy* owner = r.transfer_owner[id];
      r.transfer_owner.erase(id);
      count_action("weight_transfer_done");
      owner->on_transfer_done(*this, id);
    } else {
      ++i;
    }
  }
  if (!any_wants_loads_ || !r.routing) return;
  auto* synth = dynamic_cast<SyntheticRoutingModel*>(r.routing.get());
  if (!synth) return;
  const int32_t num_moe = static_cast<int32_t>(num_moe_layers(card_));
  for (int32_t l = 0; l < num_moe; ++l) {
    auto pi = synth->selection_shares(l, step_idx, 0);
    loads_scratch_.assign(pi.size(), 0.0);
    for (size_t e = 0; e < pi.size(); ++e) {
      loads_scratch_[e] = pi[e] * static_cast<double>(step_tokens);
    }
    for (auto& p : policies_) {
      if (p->wants_expert_loads()) p->on_expert_loads(*this, r.idx, l, loads_scratch_);
    }
  }
}

int64_t ClusterSim::hits_on(const Rank& rank, const Seq& s) const {
  if (!sc_.scheduler.prefix_caching || s.decode_only || s.first_admission_done) return 0;
  const auto& h = s.req.prefix_block_hashes;
  // At least one prompt token is always computed: at most (prompt - 1) / 512 full blocks hit.
  int64_t max_blocks = (s.req.prompt_tokens - 1) / kPrefixBlock;
  int64_t n = 0;
  while (n < max_blocks && n < static_cast<int64_t>(h.size()) && rank.kv->contains(h[n])) ++n;
  return n;
}

bool ClusterSim::try_admit(Replica& r, int32_t sid, std::vector<int64_t>& budget,
                           std::vector<std::vector<SeqSlice>>& slices) {
  Seq& s = seqs_[sid];
  const GpuMemoryLayout& lay = r.layout;
  int32_t best = -1;
  int64_t best_hits = -1, best_room = 0, best_need = 0;
  for (int32_t k = 0; k < static_cast<int32_t>(r.ranks.size()); ++k) {
    if (budget[k] <= 0 && !s.decode_only) continue;
    const Rank& rank = r.ranks[k];
    int64_t hits = hits_on(rank, s);
    int64_t need = rank.kv->blocks_for_tokens(s.prefill_target) - hits * blocks_per_prefix() +
                   lay.state_blocks_per_sequence;
    if (!rank.kv->can_allocate(need)) continue;
    int64_t room = rank.kv->free_blocks() + rank.kv->evictable_blocks() -
                   static_cast<int64_t>(rank.running.size()) * 4;
    if (hits > best_hits || (hits == best_hits && room > best_room)) {
      best = k;
      best_hits = hits;
      best_room = room;
      best_need = need;
    }
  }
  if (best < 0) return false;
  Rank& rank = r.ranks[best];
  int64_t pinned = 0;
  if (best_hits > 0) {
    pinned = rank.kv->match_and_pin(
        std::span<const uint64_t>(s.req.prefix_block_hashes.data(), best_hits), ++lru_tick_);
    MOESIM_CHECK(pinned == best_hits, "prefix hits changed during admission");
  }
  MOESIM_CHECK(rank.kv->allocate(best_need), "admission allocation failed after check");
  s.rank = best;
  s.running = true;
  s.admit_order = ++admit_counter_;
  s.owned_blocks = best_need;
  s.num_hit_blocks = best_hits;
  s.num_inserted_blocks = 0;
  s.capacity_tokens = (best_need - lay.state_blocks_per_sequence) * sc_.scheduler.kv_block_tokens +
                      best_hits * kPrefixBlock;
  RequestRecord& rec = records_[sid];
  if (!s.first_admission_done) {
    s.first_admission_done = true;
    if (!s.decode_only) {
      counters_.prompt_tokens_total += s.req.prompt_tokens;
      counters_.prompt_tokens_cached += best_hits * kPrefixBlock;
      rec.cached_prompt_tokens = best_hits * kPrefixBlock;
    }
    if (rec.first_scheduled_ns < 0) rec.first_scheduled_ns = sim_.now();
  }
  if (!s.decode_only) s.prefilled = best_hits * kPrefixBlock;
  rank.running.push_back(sid);
  r.num_in_flight++;
  if (s.prefilled < s.prefill_target) {
    int64_t chunk = std::min(s.prefill_target - s.prefilled, budget[best]);
    consume(budget, best, chunk);
    SeqSlice sl{chunk, s.prefilled, true};
    slices[best].push_back(sl);
    r.batch.emplace_back(sid, sl);
  }
  return true;
}

void ClusterSim::release_seq_memory(Replica& r, Seq& s) {
  Rank& rank = r.ranks[s.rank];
  const auto& h = s.req.prefix_block_hashes;
  if (s.num_hit_blocks + s.num_inserted_blocks > 0) {
    rank.kv->unpin(std::span<const uint64_t>(h.data(), s.num_hit_blocks + s.num_inserted_blocks),
                   ++lru_tick_);
  }
  rank.kv->release(s.owned_blocks);
  s.owned_blocks = 0;
  s.num_hit_blocks = s.num_inserted_blocks = 0;
  s.capacity_tokens = 0;
  auto it =
      std::find(rank.running.begin(), rank.running.end(), static_cast<int32_t>(&s - seqs_.data()));
  MOESIM_CHECK(it != rank.running.end(), "sequence not running on its rank");
  rank.running.erase(it);
  r.num_in_flight--;
  s.running = false;
}

void ClusterSim::preempt(Replica& r, int32_t rank_idx, int32_t sid) {
  Seq& s = seqs_[sid];
  release_seq_memory(r, s);
  s.prefilled = 0;
  s.decode_only = false;
  s.prefill_target = s.req.prompt_tokens + s.generated;  // recompute everything
  s.rank = -1;
  r.waiting.push_front(sid);
  records_[sid].num_preemptions++;
  counters_.num_preemptions++;
  counters_.actions["preempt"]++;
}

bool ClusterSim::ensure_decode_capacity(Replica& r, int32_t rank_idx, int32_t sid) {
  Rank& rank = r.ranks[rank_idx];
  Seq& s = seqs_[sid];
  int64_t needed_tokens = s.req.prompt_tokens + s.generated;
  while (s.capacity_tokens < needed_tokens) {
    if (rank.kv->allocate(1)) {
      s.owned_blocks++;
      s.capacity_tokens += sc_.scheduler.kv_block_tokens;
      continue;
    }
    // Out of blocks: preempt the most recently admitted sequence of this rank.
    int32_t victim = rank.running.back();
    for (int32_t v : rank.running) {
      if (seqs_[v].admit_order > seqs_[victim].admit_order) victim = v;
    }
    preempt(r, rank_idx, victim);
    if (victim == sid) return false;
  }
  return true;
}

void ClusterSim::try_start_step(Replica& r) {
  if (r.busy) return;
  const int32_t num_ranks = static_cast<int32_t>(r.ranks.size());
  std::vector<int64_t> budget(num_ranks, sc_.scheduler.max_batch_tokens_per_gpu);
  step_tokens_left_ = r.max_step_tokens > 0 ? r.max_step_tokens : INT64_MAX;
  auto& slices = slices_scratch_;
  slices.assign(num_ranks, {});
  r.batch.clear();
  // 1. Decode tokens of running sequences (may preempt when blocks run out).
  for (int32_t k = 0; k < num_ranks; ++k) {
    std::vector<int32_t> snapshot = r.ranks[k].running;
    for (int32_t sid : snapshot) {
      Seq& s = seqs_[sid];
      if (!s.running || s.prefilled < s.prefill_target) continue;
      if (budget[k] <= 0) break;
      if (!ensure_decode_capacity(r, k, sid)) continue;
      consume(budget, k, 1);
      SeqSlice sl{1, s.req.prompt_tokens + s.generated - 1, false};
      slices[k].push_back(sl);
      r.batch.emplace_back(sid, sl);
    }
  }
  // Preemption may have evicted a sequence already in the batch: drop those.
  {
    std::vector<std::pair<int32_t, SeqSlice>> kept;
    for (auto& [sid, sl] : r.batch) {
      if (seqs_[sid].running) kept.emplace_back(sid, sl);
    }
    if (kept.size() != r.batch.size()) {
      r.batch = kept;
      slices.assign(num_ranks, {});
      for (auto& [sid, sl] : r.batch) slices[seqs_[sid].rank].push_back(sl);
    }
  }
  // 2. Prefill chunks of running sequences.
  for (int32_t k = 0; k < num_ranks; ++k) {
    for (int32_t sid : r.ranks[k].running) {
      Seq& s = seqs_[sid];
      if (s.prefilled >= s.prefill_target || budget[k] <= 0) continue;
      int64_t chunk = std::min(s.prefill_target - s.prefilled, budget[k]);
      consume(budget, k, chunk);
      SeqSlice sl{chunk, s.prefilled, true};
      slices[k].push_back(sl);
      r.batch.emplace_back(sid, sl);
    }
  }
  // 3. Admissions, first come first served (head-of-line: stop at the first that does not fit).
  while (!r.waiting.empty() && r.num_in_flight < r.max_seqs) {
    int32_t sid = r.waiting.front();
    if (!try_admit(r, sid, budget, slices)) break;
    r.waiting.pop_front();
    Seq& s = seqs_[sid];
    if (s.prefilled >= s.prefill_target) {
      // KV arrived from a prefill replica: decode right away.
      if (ensure_decode_capacity(r, s.rank, sid)) {
        SeqSlice sl{1, s.req.prompt_tokens + s.generated - 1, false};
        slices[s.rank].push_back(sl);
        r.batch.emplace_back(sid, sl);
      }
    }
  }
  if (r.batch.empty()) return;
  bool in_window =
      opt_.chrome_trace && sim_.now() >= opt_.trace_start_ns && sim_.now() < opt_.trace_end_ns;
  bool record = opt_.record_steps && recorded_steps_ < opt_.record_max_steps;
  TraceObserver tracer(&trace_, r, sim_.now());
  StepRecord rec;
  rec.step = r.step_idx;
  rec.replica = r.idx;
  std::optional<RecordObserver> recorder;
  StepObserver* obs = nullptr;
  if (record) {
    recorder.emplace(&rec, r, r.placement.get(), sim_.rng("record.split"));
    recorder->chained = in_window ? &tracer : nullptr;
    obs = &*recorder;
  } else if (in_window) {
    obs = &tracer;
  }
  const StepResult& res = r.step_model->run(r.step_idx, slices, obs);
  r.busy = true;
  r.step_start_ns = sim_.now();
  counters_.num_steps++;
  counters_.dispatch_bytes += res.dispatch_bytes;
  counters_.combine_bytes += res.combine_bytes;
  counters_.max_gpu_selections_sum += res.max_gpu_selections;
  counters_.mean_gpu_selections_sum += res.mean_gpu_selections;
  for (size_t g = 0; g < r.gpus.size(); ++g) {
    GpuRecord& gr = gpu_records_[r.gpus[g].value];
    gr.compute_ns += res.compute_ns[g];
    gr.comm_ns += res.comm_ns[g];
    gr.wait_ns += res.wait_ns[g];
  }
  if (record) {
    rec.start_ns = sim_.now();
    rec.end_ns = sim_.now() + res.duration_ns;
    const int32_t tp = static_cast<int32_t>(r.gpus.size()) / static_cast<int32_t>(r.ranks.size());
    for (auto& [sid, sl] : r.batch) {
      rec.seqs.push_back(StepRecord::Seq{seqs_[sid].req.id.value,
                                         r.gpus[seqs_[sid].rank * tp].value, sl.prefill,
                                         sl.new_tokens, sl.context_tokens});
    }
    if (r.placement) {
      std::vector<std::vector<int32_t>> now = expert_gpus_of(r);
      if (now != recorded_placement_[r.idx]) {
        placement_changes_.push_back({r.idx, rec.step, now});
        recorded_placement_[r.idx] = std::move(now);
      }
    }
    steps_.push_back(std::move(rec));
    recorded_steps_++;
  }
  sim_.schedule_after(res.duration_ns, k_step_done_, r.idx, r.step_idx);
  r.step_idx++;
}

void ClusterSim::finish_prefill(Replica& r, Seq& s) {
  // Insert the prompt's full prefix blocks into the rank's cache (ownership moves from the
  // sequence to pinned entries), so later requests with the same prefix re-use them.
  if (!sc_.scheduler.prefix_caching) return;
  Rank& rank = r.ranks[s.rank];
  const auto& h = s.req.prefix_block_hashes;
  int64_t full =
      std::min<int64_t>(s.req.prompt_tokens / kPrefixBlock, static_cast<int64_t>(h.size()));
  int64_t next = s.num_hit_blocks + s.num_inserted_blocks;
  while (next < full && !rank.kv->contains(h[next]) &&
         s.owned_blocks >= blocks_per_prefix() + r.layout.state_blocks_per_sequence) {
    rank.kv->insert_pinned(h[next], blocks_per_prefix(), kPrefixBlock, ++lru_tick_);
    s.owned_blocks -= blocks_per_prefix();
    s.num_inserted_blocks++;
    next++;
  }
}

void ClusterSim::complete(Replica& r, int32_t sid) {
  Seq& s = seqs_[sid];
  RequestRecord& rec = records_[sid];
  rec.outcome = RequestOutcome::kCompleted;
  rec.done_ns = sim_.now();
  rec.generated_tokens = s.generated;
  std::optional<Request> next;
  if (s.req.session.valid()) next = workload_->on_turn_completed(s.req.session, sim_.now());
  if (next && sc_.scheduler.prefix_caching) {
    // The context of this turn is the next turn's re-used prefix: keep its full blocks cached.
    Rank& rank = r.ranks[s.rank];
    int64_t reuse_blocks =
        std::min<int64_t>(next->reused_prefix_tokens / kPrefixBlock,
                          static_cast<int64_t>(next->prefix_block_hashes.size()));
    for (int64_t b = 0; b < reuse_blocks; ++b) {
      uint64_t key = next->prefix_block_hashes[b];
      if (rank.kv->contains(key)) continue;
      if (s.owned_blocks - r.layout.state_blocks_per_sequence < blocks_per_prefix()) break;
      rank.kv->insert_unpinned_merge(key, blocks_per_prefix(), kPrefixBlock, ++lru_tick_);
      s.owned_blocks -= blocks_per_prefix();
    }
  }
  release_seq_memory(r, s);
  r.outstanding--;
  for (auto& p : policies_) p->on_complete(*this, s.req, rec);
  if (next) {
    int64_t key = next_pending_key_++;
    SimTime at = std::max(next->arrival_ns, sim_.now());
    pending_.emplace(key, std::move(*next));
    sim_.schedule_at(at, k_arrival_, key, 0);
  }
}

void ClusterSim::on_step_done(const Event& e) {
  Replica& r = replicas_[e.id0];
  r.busy = false;
  std::vector<int32_t> to_transfer;
  int64_t step_tokens = 0;
  for (auto& [sid, sl] : r.batch) step_tokens += sl.new_tokens;
  for (auto& [sid, sl] : r.batch) {
    Seq& s = seqs_[sid];
    if (!s.running) continue;
    if (sl.prefill) {
      s.prefilled += sl.new_tokens;
      if (s.prefilled < s.prefill_target) continue;
      finish_prefill(r, s);
    }
    s.generated += 1;
    RequestRecord& rec = records_[sid];
    rec.generated_tokens = s.generated;
    if (rec.first_token_ns < 0) rec.first_token_ns = sim_.now();
    if (s.generated >= s.req.output_tokens) {
      complete(r, sid);
    } else if (r.prefill_only) {
      to_transfer.push_back(sid);
    }
  }
  for (int32_t sid : to_transfer) {
    // P/D: move the KV to a decode replica over the network, then free it here.
    Seq& s = seqs_[sid];
    int32_t dst = pick_replica(s.req, true);
    GpuId src_gpu = r.gpus[s.rank * (static_cast<int32_t>(r.gpus.size()) /
                                     static_cast<int32_t>(r.ranks.size()))];
    Replica& dr = replicas_[dst];
    GpuId dst_gpu = dr.gpus[s.rank % dr.gpus.size()];
    double bytes =
        r.layout.kv_bytes_per_token * static_cast<double>(s.req.prompt_tokens + s.generated - 1) +
        r.layout.state_bytes_per_sequence;
    double min_cap = 0;
    for (int32_t link : topo_.route(src_gpu, dst_gpu)) {
      double c = topo_.links()[link].capacity_bytes_per_s;
      min_cap = min_cap == 0 ? c : std::min(min_cap, c);
    }
    SimTime t = topo_.route_latency_ns(src_gpu, dst_gpu) +
                (min_cap > 0 ? from_seconds(bytes / min_cap) : 0);
    release_seq_memory(r, s);
    r.outstanding--;
    counters_.kv_transfers++;
    counters_.kv_transfer_bytes += bytes;
    dr.outstanding++;
    s.replica = dst;
    s.decode_only = true;
    s.prefilled = s.prefill_target;
    s.rank = -1;
    records_[sid].replica = dst;
    sim_.schedule_after(t, k_transfer_, sid, dst);
  }
  after_step_policies(r, e.id1, step_tokens);
  try_start_step(r);
}

void ClusterSim::on_transfer_done(const Event& e) {
  Replica& dr = replicas_[e.id1];
  dr.waiting.push_back(static_cast<int32_t>(e.id0));
  try_start_step(dr);
}

}  // namespace moesim::sim::detail
