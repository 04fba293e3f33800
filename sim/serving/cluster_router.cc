#include "sim/serving/cluster_router.h"

#include "base/check.h"

namespace moesim::sim {

ClusterRouter::ClusterRouter(const DeploymentSpec& deployment, RouterPolicy policy)
    : deployment_(deployment), policy_(policy), outstanding_(deployment.num_replicas, 0) {
  if (deployment.pools.empty()) {
    pools_.push_back(Pool{"default", deployment.prefill_replicas, deployment.num_replicas});
  } else {
    int32_t next = 0;
    for (const PoolSpec& p : deployment.pools) {
      pools_.push_back(Pool{p.name, next, next + p.num_replicas});
      next += p.num_replicas;
    }
  }
}

int32_t ClusterRouter::pick(const Request& req, bool decode_pool, const std::string& pool) {
  const DeploymentSpec& d = deployment_;
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
  if (policy_ == RouterPolicy::kRoundRobin) return lo + (rr_next_++ % (hi - lo));
  if (policy_ == RouterPolicy::kCacheAware && !decode_pool) {
    MOESIM_CHECK(static_cast<bool>(cache_probe_), "cache_aware routing without a cache probe");
    int32_t best = -1;
    int64_t best_cost = 0;
    for (int32_t i = lo; i < hi; ++i) {
      const CacheView v = cache_probe_(i, req);
      const int64_t cost = (req.prompt_tokens - v.cached_tokens) + v.pending_prefill_tokens;
      if (best < 0 || cost < best_cost ||
          (cost == best_cost && outstanding_[i] < outstanding_[best])) {
        best = i;
        best_cost = cost;
      }
    }
    return best;
  }
  const bool affine =
      policy_ == RouterPolicy::kSessionAffinity && req.session.valid() && !decode_pool;
  if (affine) {
    auto it = session_replica_.find(req.session.value);
    if (it != session_replica_.end()) return it->second;
  }
  int32_t best = lo;
  for (int32_t i = lo + 1; i < hi; ++i) {
    if (outstanding_[i] < outstanding_[best]) best = i;
  }
  if (affine) session_replica_[req.session.value] = best;
  return best;
}

int64_t ClusterRouter::total_outstanding() const {
  int64_t n = 0;
  for (int32_t o : outstanding_) n += o;
  return n;
}

std::vector<std::string> ClusterRouter::pool_names() const {
  std::vector<std::string> out;
  for (const Pool& p : pools_) out.push_back(p.name);
  return out;
}

int64_t ClusterRouter::pool_outstanding(const std::string& pool) const {
  int64_t n = 0;
  for (const Pool& p : pools_) {
    if (p.name != pool) continue;
    for (int32_t i = p.first; i < p.last; ++i) n += outstanding_[i];
  }
  return n;
}

}  // namespace moesim::sim
