// ClusterSim's step lifecycle: a replica's scheduler returns a batch, the step model times it
// (observed by the Chrome trace and the step recorder when asked), the step ends as an event;
// then sequences advance, finish or move to a decode replica (P/D KV transfers, priced by the
// network model), and the per-step policy hooks run.
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "base/check.h"
#include "sim/serving/cluster_sim.h"
#include "sim/serving/step_recorder.h"

namespace moesim::sim::detail {

void ClusterSim::try_start_step(Replica& r) {
  if (r.busy) return;
  const ScheduledBatch& batch = r.scheduler->schedule(sim_.now());
  if (kv_tiers_) track_kv_loads(r);
  if (batch.empty()) return;
  const std::vector<int32_t>& traced = sc_.outputs.trace_replicas;
  const bool in_window =
      recorder_.traces_step(sim_.now()) &&
      (traced.empty() || std::find(traced.begin(), traced.end(), r.idx) != traced.end());
  const bool record = recorder_.records_step();
  TraceObserver tracer(recorder_.trace(), r.idx, r.gpus(), sim_.now());
  StepRecord rec;
  rec.step = r.step_idx;
  rec.replica = r.idx;
  std::optional<RecordObserver> step_recorder;
  StepObserver* obs = nullptr;
  if (record) {
    step_recorder.emplace(&rec, r.gpus(), r.placements(), r.parts.routing.get(),
                          sim_.rng("record.split"));
    step_recorder->chained = in_window ? &tracer : nullptr;
    obs = &*step_recorder;
  } else if (in_window) {
    obs = &tracer;
  }
  if (kv_tiers_) slow_for_kv_copies(r);
  const StepResult& res = r.parts.step_model->run(r.step_idx, batch.ranks, obs);
  if (r.shadow.step_model && r.step_idx % opt_.tier_check_every == 0) check_tiers(r, batch, res);
  if (kv_tiers_) delay_kv_copies(r, res);
  r.last_step_ns = res.duration_ns;
  r.busy = true;
  if (draft_acceptance_) draft_acceptance_->add_step(res.duration_ns, res.draft_ns);
  if (!res.draft_gpu_busy_ns.empty()) {
    // The draft GPUs (SpeculativeSpec::draft_gpus): busy in the draft passes, idle otherwise.
    const std::vector<GpuId>& draft = r.draft_gpus;
    SimTime busy = 0;
    for (size_t j = 0; j < draft.size(); ++j) {
      GpuRecord& rec = recorder_.gpu(draft[j].value);
      rec.compute_ns += res.draft_gpu_busy_ns[j];
      rec.wait_ns += res.duration_ns - res.draft_gpu_busy_ns[j];
      busy += res.draft_gpu_busy_ns[j];
    }
    draft_acceptance_->add_draft_gpus(busy, res.duration_ns * static_cast<SimTime>(draft.size()));
  }
  if (any_wants_loads_) r.step_expert_loads = res.expert_loads;
  recorder_.on_step(StepUsage{r.gpus(), res.compute_ns, res.comm_ns, res.wait_ns, res});
  if (recorder_.keeps_step_series()) add_series_row(r, batch, res);
  if (record) record_step(r, std::move(rec), res.duration_ns);
  sim_.schedule_after(res.duration_ns, k_step_done_, r.idx, r.step_idx);
  r.step_idx++;
}

void ClusterSim::track_kv_loads(Replica& r) {
  for (const KvLoadStarted& l : r.scheduler->loads_started()) {
    kv_loads_[l.load_id] = KvLoadInFlight{r.idx, l};
    sim_.schedule_at(std::max(l.ready_ns, sim_.now()), k_kv_load_, r.idx, l.load_id);
  }
}

void ClusterSim::on_kv_load_ready(const Event& e) {
  auto it = kv_loads_.find(e.id1);
  MOESIM_CHECK(it != kv_loads_.end(), "a KV load ready event without its load");
  const KvLoadStarted& l = it->second.load;
  if (l.ready_ns > sim_.now()) return;  // contention moved it: a later event fires
  Replica& r = replicas_[static_cast<size_t>(e.id0)];
  const std::vector<int32_t>& traced = sc_.outputs.trace_replicas;
  if (recorder_.traces_step(l.start_ns) &&
      (traced.empty() || std::find(traced.begin(), traced.end(), r.idx) != traced.end())) {
    recorder_.trace()->push_back(TraceSlice{r.idx, r.gpus()[l.rank * r.tp()].value, "kv_load", -1,
                                            l.start_ns, l.ready_ns - l.start_ns});
  }
  kv_loads_.erase(it);
  try_start_step(r);
}

void ClusterSim::slow_for_kv_copies(Replica& r) {
  const size_t n = r.gpus().size();
  const SimTime t0 = sim_.now();
  const SimTime t1 = t0 + std::max<SimTime>(r.last_step_ns, 1);
  nic_in_slow_.assign(n, 1.0);
  nic_out_slow_.assign(n, 1.0);
  int64_t slowed = 0;
  for (size_t i = 0; i < n; ++i) {
    const HostPathShare share = kv_tiers_->busy_share(r.gpus()[i].value, t0, t1);
    if (!share.any()) continue;
    nic_in_slow_[i] = kv_tiers_->nic_in_slowdown(share);
    nic_out_slow_[i] = kv_tiers_->nic_out_slowdown(share);
    if (nic_in_slow_[i] > 1.0 || nic_out_slow_[i] > 1.0) slowed++;
  }
  kv_tiers_->counters().slowed_gpu_steps += slowed;
  if (slowed == 0) {
    nic_in_slow_.clear();
    nic_out_slow_.clear();
  }
  r.parts.step_model->set_nic_slowdown(nic_in_slow_, nic_out_slow_);
  if (r.shadow.step_model) r.shadow.step_model->set_nic_slowdown(nic_in_slow_, nic_out_slow_);
}

void ClusterSim::delay_kv_copies(Replica& r, const StepResult& res) {
  if (!nic_in_slow_.empty()) {
    // The slowdown was for this step only: P/D transfers and later steps start from none.
    r.parts.step_model->set_nic_slowdown({}, {});
    if (r.shadow.step_model) r.shadow.step_model->set_nic_slowdown({}, {});
  }
  if (res.duration_ns <= 0 || res.nic_in_bytes.empty()) return;
  const SimTime t0 = sim_.now();
  kv_moved_.clear();
  for (size_t i = 0; i < r.gpus().size(); ++i) {
    kv_tiers_->contend(r.gpus()[i].value, t0, t0 + res.duration_ns, res.nic_in_bytes[i],
                       res.nic_out_bytes[i], &kv_moved_);
  }
  for (const auto& [id, ready] : kv_moved_) {
    auto it = kv_loads_.find(id);
    if (it == kv_loads_.end() || ready <= it->second.load.ready_ns) continue;
    KvLoadStarted& l = it->second.load;
    const int64_t sid = l.sid;
    if (sid >= seqs_.front_id()) {
      Seq& s = seqs_[sid];
      if (s.kv_load_id == id) {
        s.kv_load_ns += ready - s.kv_ready_ns;
        s.kv_ready_ns = ready;
      }
    }
    l.ready_ns = ready;
    sim_.schedule_at(ready, k_kv_load_, it->second.replica, id);
  }
}

void ClusterSim::check_tiers(Replica& r, const ScheduledBatch& batch, const StepResult& res) {
  for (const BackgroundTransfer& t : r.transfers) {
    if (t.remaining_total() > 0) {
      tier_samples_skipped_++;
      return;
    }
  }
  const StepResult& other = r.shadow.step_model->run(r.step_idx, batch.ranks, nullptr);
  const bool main_fast = r.parts.step_model->fast_tier();
  const StepResult& fast = main_fast ? res : other;
  TierSample s;
  s.replica = r.idx;
  s.step = r.step_idx;
  s.exact_ns = main_fast ? other.duration_ns : res.duration_ns;
  s.fast_ns = fast.duration_ns;
  s.fast_layers = fast.num_fast_layers;
  s.exact_layers = fast.num_exact_layers;
  tier_samples_.push_back(s);
}

void ClusterSim::add_series_row(const Replica& r, const ScheduledBatch& batch,
                                const StepResult& res) {
  StepSeriesRow row;
  row.replica = r.idx;
  row.step = r.step_idx;
  row.start_ns = sim_.now();
  row.duration_ns = res.duration_ns;
  row.num_seqs = static_cast<int32_t>(batch.seqs.size());
  for (const auto& [sid, sl] : batch.seqs) {
    (sl.prefill ? row.prefill_tokens : row.decode_tokens) += sl.new_tokens;
  }
  const ReplicaScheduler& sched = *r.scheduler;
  for (int32_t k = 0; k < sched.num_ranks(); ++k) {
    const KvCache& kv = sched.kv(k);
    row.kv_owned_blocks += kv.owned_blocks();
    row.kv_cached_blocks += kv.cached_blocks();
    row.kv_blocks += kv.num_blocks();
    if (kv.num_blocks() > 0) {
      row.kv_used_fraction_max = std::max(row.kv_used_fraction_max,
                                          static_cast<double>(kv.num_blocks() - kv.free_blocks()) /
                                              static_cast<double>(kv.num_blocks()));
    }
  }
  const size_t n = res.wait_ns.size();
  for (size_t g = 0; g < n; ++g) {
    row.compute_ns_mean += static_cast<double>(res.compute_ns[g]);
    row.comm_ns_mean += static_cast<double>(res.comm_ns[g]);
    row.wait_ns_mean += static_cast<double>(res.wait_ns[g]);
    row.wait_ns_max = std::max(row.wait_ns_max, res.wait_ns[g]);
  }
  if (n > 0) {
    row.compute_ns_mean /= static_cast<double>(n);
    row.comm_ns_mean /= static_cast<double>(n);
    row.wait_ns_mean /= static_cast<double>(n);
  }
  recorder_.add_series_row(row);
}

void ClusterSim::record_step(Replica& r, StepRecord rec, SimTime duration_ns) {
  rec.start_ns = sim_.now();
  rec.end_ns = sim_.now() + duration_ns;
  for (const auto& [sid, sl] : r.scheduler->batch().seqs) {
    rec.seqs.push_back(StepRecord::Seq{seqs_[sid].req.id.value,
                                       r.gpus()[seqs_[sid].rank * r.tp()].value, sl.prefill,
                                       sl.new_tokens, sl.context_tokens});
  }
  std::vector<ExpertGpus> layers;
  if (r.placements() && r.placement_version != r.recorded_placement_version) {
    for (int32_t l = 0; l < r.placements()->num_layers(); ++l) layers.push_back(r.expert_gpus(l));
    r.recorded_placement_version = r.placement_version;
  }
  recorder_.add_step(std::move(rec), layers.empty() ? nullptr : &layers);
}

void ClusterSim::on_step_done(const Event& e) {
  check_cancel();
  Replica& r = replicas_[e.id0];
  r.busy = false;
  std::vector<int32_t> to_transfer;
  const ScheduledBatch& batch = r.scheduler->batch();
  constexpr size_t kAhead = 16;  // sequences prefetched ahead: their first line (sequence.h)
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    if (i + kAhead < batch.seqs.size()) seqs_.prefetch(batch.seqs[i + kAhead].first, 64);
    const auto& [sid, sl] = batch.seqs[i];
    Seq& s = seqs_[sid];
    if (!s.running) continue;
    if (sl.prefill) {
      s.prefilled += sl.new_tokens;
      if (s.prefilled < s.prefill_target) continue;
      r.scheduler->finish_prefill(s, sim_.now());
    }
    // The first token: generated only ever grows, from 0 at arrival (a decode-only sequence
    // got its first token on its prefill replica).
    if (s.generated == 0) {
      records_[sid].first_token_ns = sim_.now();
      if (slo_watch_) {
        slo_watch_->on_first_token(records_[sid], sim_.now());
        check_slo_watch();
      }
    }
    if (draft_acceptance_ && !sl.prefill) {
      // Speculative decoding: the slice verified 1 + d tokens; the accepted drafts and the
      // target's own next token are committed, the rejected drafts' KV freed.
      const auto drafts = static_cast<int32_t>(sl.new_tokens - 1);
      s.generated += 1 + draft_acceptance_->verify(drafts, s.req.domain);
      r.scheduler->trim_to_committed(s);
    } else {
      s.generated += 1;
    }
    // The record's generated_tokens is written when the request completes (complete()) or the
    // run ends in flight (check_conservation), not per token.
    if (s.generated >= s.req.output_tokens) {
      complete(r, sid);
    } else if (r.prefill_only) {
      to_transfer.push_back(sid);
    }
  }
  for (int32_t sid : to_transfer) transfer_kv(r, sid);
  after_step_policies(r);
  try_start_step(r);
}

void ClusterSim::transfer_kv(Replica& r, int32_t sid) {
  // P/D: move the KV to a decode replica over the network, then free it here. The transfer is
  // one flow from the sequence's rank to the decode replica's GPU of the same rank index,
  // timed by the scenario's network model.
  Seq& s = seqs_[sid];
  const int32_t dst = router_.pick(s.req, true);
  const GpuId src_gpu = r.gpus()[s.rank * r.tp()];
  Replica& dr = replicas_[dst];
  const GpuId dst_gpu = dr.gpus()[s.rank % dr.gpus().size()];
  const GpuMemoryLayout& lay = r.scheduler->layout();
  const double bytes =
      lay.kv_bytes_per_token * static_cast<double>(s.req.prompt_tokens + s.generated - 1) +
      lay.state_bytes_per_sequence;
  const GpuId pair[2] = {src_gpu, dst_gpu};
  transfer_traffic_.reset(pair);
  transfer_traffic_.set_bytes(0, 1, bytes);
  transfer_network_->run(transfer_traffic_, transfer_result_);
  r.scheduler->release(s);
  router_.add_outstanding(r.idx, -1);
  RunCounters& counters = recorder_.counters();
  counters.kv_transfers++;
  counters.kv_transfer_bytes += bytes;
  router_.add_outstanding(dst, 1);
  s.replica = dst;
  s.decode_only = true;
  s.prefilled = s.prefill_target;
  s.rank = -1;
  records_[sid].replica = dst;
  sim_.schedule_after(transfer_result_.duration_ns, k_transfer_, sid, dst);
}

void ClusterSim::on_transfer_done(const Event& e) {
  Replica& dr = replicas_[e.id1];
  dr.scheduler->enqueue(static_cast<int32_t>(e.id0));
  try_start_step(dr);
}

void ClusterSim::after_step_policies(Replica& r) {
  // Finished background transfers.
  for (size_t i = 0; i < r.transfers.size();) {
    if (r.transfers[i].remaining_total() > 0) {
      ++i;
      continue;
    }
    const int64_t id = r.transfers[i].id;
    r.transfers.erase(r.transfers.begin() + static_cast<std::ptrdiff_t>(i));
    ServingPolicy* owner = r.transfer_owner[id];
    r.transfer_owner.erase(id);
    count_action("weight_transfer_done");
    owner->on_transfer_done(*this, id);
  }
  // Expected selections per expert of each MoE layer, as the step model reported them for the
  // step that just ended (any routing model that states them: synthetic or replayed).
  if (!any_wants_loads_ || r.step_expert_loads.empty()) return;
  const auto num_moe = static_cast<size_t>(num_moe_layers(card_));
  const size_t num_experts = r.step_expert_loads.size() / num_moe;
  for (size_t l = 0; l < num_moe; ++l) {
    const std::span<const double> loads(r.step_expert_loads.data() + l * num_experts, num_experts);
    for (auto& p : policies_) {
      if (p->wants_expert_loads()) {
        p->on_expert_loads(*this, r.idx, static_cast<int32_t>(l), loads);
      }
    }
  }
}

}  // namespace moesim::sim::detail
