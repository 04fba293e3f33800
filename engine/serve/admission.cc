// Admission policies, pools and the replica router in front of the replica schedulers.
#include "engine/serve/admission.h"

#include <set>
#include <stdexcept>

namespace moesim::engine::serve {

std::string_view router_policy_name(RouterPolicy policy) {
  switch (policy) {
    case RouterPolicy::kRoundRobin:
      return "round_robin";
    case RouterPolicy::kLeastOutstanding:
      return "least_outstanding";
    case RouterPolicy::kSessionAffinity:
      return "session_affinity";
  }
  return "?";
}

RouterPolicy parse_router_policy(std::string_view name) {
  if (name == "round_robin") return RouterPolicy::kRoundRobin;
  if (name == "least_outstanding") return RouterPolicy::kLeastOutstanding;
  if (name == "session_affinity") return RouterPolicy::kSessionAffinity;
  if (name == "cache_aware") {
    throw std::invalid_argument(
        "router 'cache_aware' is not supported by the engine (it needs a prefix cache; valid: "
        "round_robin, least_outstanding, session_affinity)");
  }
  throw std::invalid_argument("unknown router '" + std::string(name) +
                              "' (valid: round_robin, least_outstanding, session_affinity)");
}

std::string_view long_context_action_name(LongContextAction action) {
  return action == LongContextAction::kReject ? "reject" : "route";
}

LongContextAction parse_long_context_action(std::string_view name) {
  if (name == "reject") return LongContextAction::kReject;
  if (name == "route") return LongContextAction::kRoute;
  if (name == "summarize" || name == "offline") {
    throw std::invalid_argument("long_context_cap action '" + std::string(name) +
                                "' is not supported by the engine (valid: reject, route)");
  }
  throw std::invalid_argument("unknown long_context_cap action '" + std::string(name) +
                              "' (valid: reject, route)");
}

namespace {

SchedulerConfig replica_config(const SchedulerConfig& base, const AdmissionConfig& config,
                               int64_t num_ranks) {
  SchedulerConfig c = base;
  c.num_ranks = num_ranks;
  if (config.concurrency_cap) {
    const ConcurrencyCap& cap = *config.concurrency_cap;
    if (cap.max_seqs_per_replica <= 0 && cap.max_step_tokens_per_replica <= 0) {
      throw std::invalid_argument("admission.concurrency_cap: at least one value must be > 0");
    }
    if (cap.max_seqs_per_replica > 0) c.max_seqs = cap.max_seqs_per_replica;
    if (cap.max_step_tokens_per_replica > 0) c.max_step_tokens = cap.max_step_tokens_per_replica;
  }
  return c;
}

}  // namespace

int64_t ServeFront::pool_index(const std::string& name, const std::string& field) const {
  for (size_t i = 0; i < config_.pools.size(); ++i) {
    if (config_.pools[i].name == name) return static_cast<int64_t>(i);
  }
  throw std::invalid_argument(field + ": pool '" + name + "' is not declared");
}

ServeFront::ServeFront(const AdmissionConfig& config, const SchedulerConfig& base,
                       const std::vector<int64_t>& num_ranks)
    : config_(config) {
  if (num_ranks.empty()) throw std::invalid_argument("the deployment has no replica");
  for (size_t r = 0; r < num_ranks.size(); ++r) {
    schedulers_.emplace_back(replica_config(base, config_, num_ranks[r]));
    all_replicas_.push_back(static_cast<int64_t>(r));
  }
  std::set<std::string> names;
  std::set<int64_t> used;
  for (const PoolSpec& pool : config_.pools) {
    if (!names.insert(pool.name).second) {
      throw std::invalid_argument("pools: '" + pool.name + "' declared twice");
    }
    if (pool.replicas.empty()) {
      throw std::invalid_argument("pools: '" + pool.name + "' has no replica");
    }
    for (int64_t r : pool.replicas) {
      if (r < 0 || r >= num_replicas()) {
        throw std::invalid_argument("pools: '" + pool.name + "' names replica " +
                                    std::to_string(r) + ", out of range");
      }
      if (!used.insert(r).second) {
        throw std::invalid_argument("pools: replica " + std::to_string(r) +
                                    " is in more than one pool");
      }
    }
  }
  if (config_.queue_isolation && config_.queue_isolation->isolate) {
    const QueueIsolation& q = *config_.queue_isolation;
    pool_index(q.short_pool, "admission.queue_isolation.short_pool");
    pool_index(q.long_pool, "admission.queue_isolation.long_pool");
    if (q.short_pool == q.long_pool) {
      throw std::invalid_argument("admission.queue_isolation: short_pool and long_pool are '" +
                                  q.short_pool + "' both");
    }
  }
  if (config_.long_context_cap) {
    const LongContextCap& l = *config_.long_context_cap;
    if (l.action == LongContextAction::kRoute) {
      pool_index(l.pool, "admission.long_context_cap.pool");
    }
    if (!l.short_pool.empty()) pool_index(l.short_pool, "admission.long_context_cap.short_pool");
  }
}

int64_t ServeFront::pick_pool(int64_t prompt_tokens, bool& rejected) const {
  rejected = false;
  if (config_.long_context_cap && prompt_tokens > config_.long_context_cap->threshold_tokens) {
    const LongContextCap& l = *config_.long_context_cap;
    if (l.action == LongContextAction::kReject) {
      rejected = true;
      return -1;
    }
    return pool_index(l.pool, "admission.long_context_cap.pool");
  }
  if (config_.queue_isolation && config_.queue_isolation->isolate) {
    const QueueIsolation& q = *config_.queue_isolation;
    return pool_index(prompt_tokens >= q.long_threshold_tokens ? q.long_pool : q.short_pool,
                      "admission.queue_isolation");
  }
  if (config_.long_context_cap && !config_.long_context_cap->short_pool.empty()) {
    return pool_index(config_.long_context_cap->short_pool, "admission.long_context_cap");
  }
  return config_.pools.empty() ? -1 : 0;  // declared pools without a policy: the first one
}

int64_t ServeFront::least_outstanding(const std::vector<int64_t>& candidates) const {
  int64_t best = candidates.front();
  for (int64_t r : candidates) {
    const int64_t o = schedulers_[r].outstanding();
    const int64_t best_o = schedulers_[best].outstanding();
    if (o < best_o || (o == best_o && r < best)) best = r;
  }
  return best;
}

int64_t ServeFront::route(const std::vector<int64_t>& candidates, int64_t session_id) {
  switch (config_.router) {
    case RouterPolicy::kRoundRobin:
      return candidates[round_robin_counter_++ % static_cast<int64_t>(candidates.size())];
    case RouterPolicy::kLeastOutstanding:
      return least_outstanding(candidates);
    case RouterPolicy::kSessionAffinity: {
      if (session_id < 0) return least_outstanding(candidates);
      auto it = session_replica_.find(session_id);
      if (it != session_replica_.end()) {
        for (int64_t r : candidates) {
          if (r == it->second) return r;
        }
      }
      const int64_t r = least_outstanding(candidates);
      if (it == session_replica_.end()) session_replica_.emplace(session_id, r);
      return r;
    }
  }
  return candidates.front();
}

ArrivalDecision ServeFront::arrive(const Arrival& arrival) {
  ArrivalDecision d;
  bool rejected = false;
  const int64_t pool = pick_pool(arrival.request.prompt_tokens, rejected);
  if (rejected) {
    d.reject_reason = "long_context";
    return d;
  }
  if (pool >= 0) d.pool = config_.pools[pool].name;
  d.replica = route(pool >= 0 ? config_.pools[pool].replicas : all_replicas_, arrival.session_id);
  d.result = schedulers_[d.replica].add(arrival.request);
  d.reject_reason = reject_reason_name(d.result);
  return d;
}

bool ServeFront::idle() const {
  for (const Scheduler& s : schedulers_) {
    if (!s.idle()) return false;
  }
  return true;
}

}  // namespace moesim::engine::serve
