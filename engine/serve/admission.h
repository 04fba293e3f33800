// The front of `moesim-engine serve`: the admission policies a request trace carries (concurrency
// cap, queue isolation, long-context cap: docs/policies/), the named replica pools, the replica
// router (docs/serving.md "Router and replicas") and one Scheduler per replica. Like the
// scheduler it is pure and deterministic: the serve loop hands it arrivals in arrival order and
// drives each replica's Scheduler (not thread-safe: the loop serialises calls). Policies the
// engine cannot run are refused with an std::invalid_argument naming them (cache-aware routing
// needs a prefix cache; the long-context cap's summarize and offline actions change the request or
// hold it for a batch window).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/serve/scheduler.h"

namespace moesim::engine::serve {

enum class RouterPolicy { kRoundRobin, kLeastOutstanding, kSessionAffinity };
// "round_robin", "least_outstanding", "session_affinity".
std::string_view router_policy_name(RouterPolicy policy);
// The policy named `name`; throws std::invalid_argument for cache_aware (needs prefix caching)
// and for unknown names (listing the valid ones).
RouterPolicy parse_router_policy(std::string_view name);

struct PoolSpec {
  std::string name;
  std::vector<int64_t> replicas;  // replica indices, each in at most one pool
};

// docs/policies/concurrency_cap.md; 0 or -1 keeps the scheduler's value (one must be > 0).
struct ConcurrencyCap {
  int64_t max_seqs_per_replica = 0;
  int64_t max_step_tokens_per_replica = 0;
};

// docs/policies/queue_isolation.md: prompts >= long_threshold_tokens are long.
struct QueueIsolation {
  int64_t long_threshold_tokens = 8192;
  bool isolate = true;     // false: classes only, routes nothing
  std::string short_pool;  // required when isolating
  std::string long_pool;   // required when isolating, differs from short_pool
};

enum class LongContextAction { kReject, kRoute };
// "reject", "route"; parse refuses "summarize" and "offline" (not served by the engine) and
// unknown names with std::invalid_argument.
std::string_view long_context_action_name(LongContextAction action);
LongContextAction parse_long_context_action(std::string_view name);

// docs/policies/long_context_cap.md: prompts > threshold_tokens are acted on.
struct LongContextCap {
  int64_t threshold_tokens = 131072;
  LongContextAction action = LongContextAction::kReject;
  std::string pool;        // kRoute: the long-context pool (required)
  std::string short_pool;  // the other requests' pool; "": queue isolation's or the first pool
};

struct AdmissionConfig {
  RouterPolicy router = RouterPolicy::kLeastOutstanding;
  std::vector<PoolSpec> pools;  // empty: one pool of every replica
  std::optional<ConcurrencyCap> concurrency_cap;
  std::optional<QueueIsolation> queue_isolation;
  std::optional<LongContextCap> long_context_cap;
};

// An arrival as the front sees it.
struct Arrival {
  ServeRequest request;
  int64_t session_id = -1;  // < 0: no session (session_affinity routes it like least_outstanding)
};

struct ArrivalDecision {
  int64_t replica = -1;  // the replica it was routed to; -1 when a policy rejected it
  std::string pool;      // the pool it was routed in ("" without pools)
  AddResult result = AddResult::kQueued;  // the replica scheduler's answer (when routed)
  std::string reject_reason;  // requests.csv's reject_reason: "" when queued, "long_context"
                              // (long-context cap) or reject_reason_name(result)
  bool queued() const { return reject_reason.empty(); }
};

class ServeFront {
 public:
  // `base`: the trace's scheduler settings (its num_ranks is ignored); `num_ranks[r]`: attention
  // ranks of replica r. The concurrency cap replaces max_seqs / max_step_tokens. Throws
  // std::invalid_argument on a bad combination (unknown or overlapping pools, a pool without
  // replicas, a replica out of range, a policy naming an undeclared pool, a concurrency cap
  // with no value > 0).
  ServeFront(const AdmissionConfig& config, const SchedulerConfig& base,
             const std::vector<int64_t>& num_ranks);

  // Classifies, routes and enqueues (or rejects) one arrival. Call in arrival order.
  ArrivalDecision arrive(const Arrival& arrival);

  int64_t num_replicas() const { return static_cast<int64_t>(schedulers_.size()); }
  Scheduler& scheduler(int64_t replica) { return schedulers_.at(replica); }
  const Scheduler& scheduler(int64_t replica) const { return schedulers_.at(replica); }
  bool idle() const;  // every replica idle
  const AdmissionConfig& config() const { return config_; }

 private:
  // The pool index for `prompt_tokens`, or -1 for "every replica"; sets `rejected` when the
  // long-context cap rejects.
  int64_t pick_pool(int64_t prompt_tokens, bool& rejected) const;
  int64_t pool_index(const std::string& name, const std::string& field) const;
  int64_t route(const std::vector<int64_t>& candidates, int64_t session_id);
  int64_t least_outstanding(const std::vector<int64_t>& candidates) const;

  AdmissionConfig config_;
  std::vector<Scheduler> schedulers_;
  std::vector<int64_t> all_replicas_;
  int64_t round_robin_counter_ = 0;             // one counter over all pools
  std::map<int64_t, int64_t> session_replica_;  // session -> replica of its first turn
};

}  // namespace moesim::engine::serve
