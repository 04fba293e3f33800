// ClusterSim's step lifecycle: a replica's scheduler returns a batch, the step model times it,
// the step's watchers see it (fidelity check, tiered KV traffic, speculative decoding's accounting,
// the recording), and the step ends as an event; then sequences advance, finish or move to a
// decode replica (P/D KV transfers, priced by the network model), and the per-step policy hooks
// run.
#include <algorithm>
#include <utility>
#include <vector>

#include "base/check.h"
#include "sim/serving/cluster_sim.h"

namespace moesim::sim::detail {

void ClusterSim::try_start_step(Replica& r) {
  if (r.busy) return;
  const ScheduledBatch& batch = r.scheduler->schedule(sim_.now());
  if (kv_traffic_) kv_traffic_->track_loads(r);
  if (batch.empty()) return;
  StepInput input{r.step_idx, &batch.ranks, recording_->begin(r), {}, {}};
  if (kv_traffic_)
    std::tie(input.nic_in_slowdown, input.nic_out_slowdown) = kv_traffic_->slowdown(r);
  const StepResult& res = r.step_model().run(input);
  if (fidelity_checker_) fidelity_checker_->check(r, input, res);
  if (kv_traffic_) kv_traffic_->after_step(r, res);
  if (draft_accounting_) draft_accounting_->on_step(r, res);
  recording_->finish(r, batch, res);
  if (any_wants_loads_) r.step_expert_loads = res.expert_loads;
  if (opt_.expert_selections && !res.expert_loads.empty()) {
    if (expert_selections_.empty()) expert_selections_.assign(res.expert_loads.size(), 0.0);
    for (size_t i = 0; i < res.expert_loads.size(); ++i) {
      expert_selections_[i] += res.expert_loads[i];
    }
  }
  r.last_step_ns = res.duration_ns;
  r.busy = true;
  sim_.schedule_after(res.duration_ns, k_step_done_, r.idx, r.step_idx);
  r.step_idx++;
}

void ClusterSim::on_step_done(const Event& e) {
  check_cancel();
  if (slo_watch_) {
    slo_watch_->on_time(sim_.now());
    check_slo_watch();
  }
  Replica& r = replicas_[e.id0];
  r.busy = false;
  std::vector<int32_t> to_transfer;
  const ScheduledBatch& batch = r.scheduler->batch();
  constexpr size_t kAhead = 16;  // sequences prefetched ahead: their first line (sequence.h)
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    if (i + kAhead < batch.seqs.size()) seqs_.prefetch(batch.seqs[i + kAhead].first, 64);
    const auto& [sid, sl] = batch.seqs[i];
    if (advance_sequence(r, sid, sl)) to_transfer.push_back(sid);
  }
  for (int32_t sid : to_transfer) transfer_kv(r, sid);
  after_step_policies(r);
  try_start_step(r);
}

bool ClusterSim::advance_sequence(Replica& r, int32_t sid, const SeqSlice& sl) {
  Seq& s = seqs_[sid];
  if (!s.running) return false;
  if (sl.prefill) {
    s.prefilled += sl.new_tokens;
    if (s.prefilled < s.prefill_target) return false;
    r.scheduler->finish_prefill(s, sim_.now());
  }
  // The first token: generated only ever grows, from 0 at arrival (a decode-only sequence got its
  // first token on its prefill replica).
  if (s.generated == 0) {
    records_[sid].first_token_ns = sim_.now();
    series_.on_first_token(records_[sid].arrival_ns, to_ms(records_[sid].ttft_ns()));
    if (slo_watch_) {
      slo_watch_->on_first_token(records_[sid], sim_.now(), sid);
      check_slo_watch();
    }
  }
  if (draft_acceptance_ && !sl.prefill) {
    // Speculative decoding: the slice verified 1 + d tokens; the accepted drafts and the target's
    // own next token are committed, the rejected drafts' KV freed.
    const auto drafts = static_cast<int32_t>(sl.new_tokens - 1);
    const int32_t committed = 1 + draft_acceptance_->verify(drafts, s.req.domain);
    s.generated += committed;
    series_.on_tokens(sim_.now(), committed);
    r.scheduler->trim_to_committed(s);
  } else {
    s.generated += 1;
    series_.on_tokens(sim_.now(), 1);
  }
  // The record's generated_tokens is written when the request completes (complete()) or the run
  // ends in flight (check_conservation), not per token.
  if (s.generated >= s.req.output_tokens) {
    complete(r, sid);
    return false;
  }
  return r.prefill_only;
}

void ClusterSim::transfer_kv(Replica& r, int32_t sid) {
  // P/D: move the KV to a decode replica over the network, then free it here.
  Seq& s = seqs_[sid];
  const int32_t dst = router_.pick(s.req, true);
  const SimTime duration_ns = pd_transfer_->price(r, replicas_[dst], s, recorder_.counters());
  r.scheduler->release(s);
  router_.add_outstanding(r.idx, -1);
  router_.add_outstanding(dst, 1);
  s.replica = dst;
  s.decode_only = true;
  s.prefilled = s.prefill_target;
  s.rank = -1;
  records_[sid].replica = dst;
  transferring_.emplace(s.arrival_idx, sid);
  sim_.schedule_after(duration_ns, k_transfer_, s.arrival_idx, dst);
}

void ClusterSim::on_transfer_done(const Event& e) {
  auto it = transferring_.find(e.id0);
  MOESIM_CHECK(it != transferring_.end(), "unknown KV transfer");
  const int32_t sid = it->second;
  transferring_.erase(it);
  Replica& dr = replicas_[e.id1];
  dr.scheduler->enqueue(sid);
  try_start_step(dr);
}

void ClusterSim::after_step_policies(Replica& r) {
  // Finished background transfers.
  std::vector<BackgroundTransfer>& transfers = *r.transfers;
  for (size_t i = 0; i < transfers.size();) {
    if (transfers[i].remaining_total() > 0) {
      ++i;
      continue;
    }
    const int64_t id = transfers[i].id;
    transfers.erase(transfers.begin() + static_cast<std::ptrdiff_t>(i));
    ServingPolicy* owner = r.transfer_owner[id];
    r.transfer_owner.erase(id);
    policy_actions_->count_action("weight_transfer_done");
    owner->on_transfer_done(*policy_ctx_, id);
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
        p->on_expert_loads(*policy_ctx_, r.idx, static_cast<int32_t>(l), loads);
      }
    }
  }
}

}  // namespace moesim::sim::detail
