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

void ClusterSim::count_rejection(Request& req, RequestRecord& rec, const std::string& reason) {
  rec.outcome = RequestOutcome::kRejected;
  rec.reject_reason = reason;
  series_.on_leave(sim_.now());
  rec.done_ns = -1;
  recorder_.counters().actions["reject:" + reason]++;
  if (slo_watch_) {
    slo_watch_->on_reject(rec, sim_.now());
    check_slo_watch();
  }
  for (auto& p : policies_) p->on_reject(*policy_ctx_, req);
  if (req.session.valid()) workload_->abandon_session(req.session);
  // Never admitted: nothing reads its prefix blocks again.
  std::vector<uint64_t>().swap(req.prefix_block_hashes);
}

void ClusterSim::reject_on_arrival(Request& req, int64_t arrival_idx, const std::string& reason) {
  RequestRecord rec = arrival_record(req, sim_.now());
  count_rejection(req, rec, reason);
  // A rejected record's statistics do not depend on the order they are added in (counts).
  stats_.add(rec, sim_.now());
  if (!emits_records_) return;
  // retire_finished() ran at this arrival: with the window empty, every older record is out.
  if (records_.empty()) {
    MOESIM_CHECK(spool_->empty(), "spooled records behind an empty window");
    emit_record(rec, sim_.now());
  } else {
    spool_->push(arrival_idx, rec);
  }
}

void ClusterSim::reject(int32_t sid, const std::string& reason) {
  count_rejection(seqs_[sid].req, records_[sid], reason);
}

void ClusterSim::admit_request(Request req) {
  if (opt_.arrival_sink) opt_.arrival_sink->add(req, sim_.now());
  AdmissionDecision decision;
  for (auto& p : policies_) {
    p->on_arrival(*policy_ctx_, req, decision);
    if (decision.reject) break;
  }
  retire_finished();
  const int64_t arrival_idx = num_arrived_++;
  series_.on_enter(sim_.now());
  if (req.attempt_idx > 0) recorder_.counters().actions["rollback_reissue"]++;
  if (decision.reject) {
    reject_on_arrival(req, arrival_idx, decision.reject_reason);
    return;
  }
  // prompt + output > the model's context, without overflowing (trace rows may hold any int64).
  if (req.prompt_tokens > card_.max_context_tokens - req.output_tokens) {
    reject_on_arrival(req, arrival_idx, "context_too_long");
    return;
  }
  // A sequence that cannot fit in one rank's KV pool even alone is refused up front.
  const GpuMemoryLayout& lay = replicas_[0].scheduler->layout();
  const int64_t prefill_target = req.prompt_tokens + decision.extra_prefill_tokens;
  if (blocks_for_sequence(lay, prefill_target + req.output_tokens, sc_.scheduler.kv_block_tokens) >
      lay.num_kv_blocks) {
    reject_on_arrival(req, arrival_idx, "kv_capacity");
    return;
  }
  int32_t ri = -1;
  if (decision.delay_ns <= 0) {
    ri = router_.pick(req, false, decision.pool);
    if (static_cast<int64_t>(replicas_[ri].scheduler->num_waiting()) >=
        sc_.scheduler.max_queued_requests) {
      reject_on_arrival(req, arrival_idx, "queue_full");
      return;
    }
  }
  const auto sid = static_cast<int32_t>(seqs_.size());
  Seq s;
  s.sid = sid;
  s.arrival_idx = arrival_idx;
  s.prefill_target = prefill_target;
  s.req = std::move(req);
  seqs_.push_back(std::move(s));
  records_.push_back(arrival_record(seqs_[sid].req, sim_.now()));
  if (decision.delay_ns > 0) {
    delayed_.emplace(arrival_idx, std::make_pair(sid, std::move(decision.pool)));
    sim_.schedule_after(decision.delay_ns, k_delayed_, arrival_idx);
    return;
  }
  enqueue(sid, ri);
}

void ClusterSim::route_seq(int32_t sid, const std::string& pool) {
  const int32_t ri = router_.pick(seqs_[sid].req, false, pool);
  if (static_cast<int64_t>(replicas_[ri].scheduler->num_waiting()) >=
      sc_.scheduler.max_queued_requests) {
    reject(sid, "queue_full");
    return;
  }
  enqueue(sid, ri);
}

void ClusterSim::enqueue(int32_t sid, int32_t ri) {
  Replica& rep = replicas_[ri];
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
