// ClusterSim's request path: open-loop and session arrivals, the admission policies, rejection,
// routing to a pool's replica, and completion (with the next turn of a session).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "base/check.h"
#include "sim/serving/cluster_sim.h"

namespace moesim::sim::detail {

void ClusterSim::schedule_arrival(Request req, bool open_loop) {
  const int64_t key = next_pending_key_++;
  const SimTime at = std::max(req.arrival_ns, sim_.now());
  pending_.emplace(key, std::move(req));
  // Open-loop arrivals carry id1 = 1 so that the next one is pulled when this one happens.
  sim_.schedule_at(at, k_arrival_, key, open_loop ? 1 : 0);
}

void ClusterSim::schedule_next_open_loop() {
  std::optional<Request> req = workload_->next();
  if (req) {
    schedule_arrival(std::move(*req), true);
  } else if (!open_loop_end_ns_) {
    // The stream's end: its arrival window's end when it has one and no request count (the
    // window, not the last draw, says how long the traffic lasts), else the last arrival.
    const WorkloadSpec& w = sc_.workload;
    const bool counted = w.num_requests || w.num_sessions;
    open_loop_end_ns_ =
        w.duration_s && !counted ? std::max(sim_.now(), from_seconds(*w.duration_s)) : sim_.now();
  }
}

void ClusterSim::on_arrival(const Event& e) {
  auto it = pending_.find(e.id0);
  MOESIM_CHECK(it != pending_.end(), "arrival of an unknown request");
  Request req = std::move(it->second);
  pending_.erase(it);
  if (e.id1 == 1) schedule_next_open_loop();
  admit_request(std::move(req));
  check_cancel();
}

void ClusterSim::reject(int32_t sid, const std::string& reason) {
  RequestRecord& rec = records_[sid];
  rec.outcome = RequestOutcome::kRejected;
  rec.reject_reason = reason;
  series_.on_leave(sim_.now());
  rec.done_ns = -1;
  recorder_.counters().actions["reject:" + reason]++;
  if (slo_watch_) {
    slo_watch_->on_reject(rec, sim_.now());
    check_slo_watch();
  }
  if (seqs_[sid].req.session.valid()) workload_->abandon_session(seqs_[sid].req.session);
  // Never admitted: nothing reads its prefix blocks again.
  std::vector<uint64_t>().swap(seqs_[sid].req.prefix_block_hashes);
}

void ClusterSim::admit_request(Request req) {
  AdmissionDecision decision;
  for (auto& p : policies_) {
    p->on_arrival(*policy_ctx_, req, decision);
    if (decision.reject) break;
  }
  retire_finished();
  const auto sid = static_cast<int32_t>(seqs_.size());
  Seq s;
  s.sid = sid;
  s.req = std::move(req);
  s.prefill_target = s.req.prompt_tokens + decision.extra_prefill_tokens;
  seqs_.push_back(std::move(s));
  const Request& r = seqs_[sid].req;
  records_.push_back(arrival_record(r, sim_.now()));
  series_.on_enter(sim_.now());
  if (r.attempt_idx > 0) recorder_.counters().actions["rollback_reissue"]++;
  if (decision.reject) {
    reject(sid, decision.reject_reason);
    return;
  }
  if (r.prompt_tokens + r.output_tokens > card_.max_context_tokens) {
    reject(sid, "context_too_long");
    return;
  }
  // A sequence that cannot fit in one rank's KV pool even alone is refused up front.
  const GpuMemoryLayout& lay = replicas_[0].scheduler->layout();
  const int64_t total = seqs_[sid].prefill_target + r.output_tokens;
  if (blocks_for_sequence(lay, total, sc_.scheduler.kv_block_tokens) > lay.num_kv_blocks) {
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
  const int32_t ri = router_.pick(seqs_[sid].req, false, pool);
  Replica& rep = replicas_[ri];
  if (static_cast<int64_t>(rep.scheduler->num_waiting()) >= sc_.scheduler.max_queued_requests) {
    reject(sid, "queue_full");
    return;
  }
  seqs_[sid].replica = ri;
  records_[sid].replica = ri;
  router_.add_outstanding(ri, 1);
  rep.scheduler->enqueue(sid);
  if (slo_watch_) slo_watch_->on_queued(sid, records_[sid].arrival_ns);
  try_start_step(rep);
}

void ClusterSim::complete(Replica& r, int32_t sid) {
  Seq& s = seqs_[sid];
  RequestRecord& rec = records_[sid];
  rec.outcome = RequestOutcome::kCompleted;
  rec.done_ns = sim_.now();
  series_.on_leave(sim_.now());
  rec.generated_tokens = s.generated;
  sync_record(seqs_[sid], records_[sid]);
  if (rec.tpot_ns() >= 0) series_.on_complete(rec.arrival_ns, rec.tpot_ns() / 1e6);
  if (slo_watch_) {
    slo_watch_->on_complete(rec, sim_.now());
    check_slo_watch();
  }
  std::optional<Request> next;
  if (s.req.session.valid()) next = workload_->on_turn_completed(s.req.session, sim_.now());
  // The context of this turn is the next turn's re-used prefix: keep its full blocks cached.
  if (next) r.scheduler->keep_for_next_turn(s, *next);
  r.scheduler->release(s);
  router_.add_outstanding(r.idx, -1);
  for (auto& p : policies_) p->on_complete(*policy_ctx_, s.req, rec);
  // Released: its blocks are unpinned, nothing reads its prefix again (the entry stays in the
  // window until every older sequence is final too).
  std::vector<uint64_t>().swap(s.req.prefix_block_hashes);
  if (next) schedule_arrival(std::move(*next), false);
}

}  // namespace moesim::sim::detail
