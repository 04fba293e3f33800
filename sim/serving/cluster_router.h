// The cluster router: which replica a request joins. Replicas are grouped into pools (declared
// [[deployment.pools]], or one "default" pool; with P/D disaggregation the prefill and the decode
// replicas). Within a pool the scheduler's router policy picks: round_robin, least_outstanding,
// session_affinity or cache_aware (Mooncake's KV-centric scheduling: the least estimated prefill
// work); docs/serving.md, "Router and replicas", has each rule and its ties. The router keeps the
// outstanding counts: the cluster reports every request that joins or leaves a replica.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/scenario/deployment.h"
#include "sim/workload/request.h"

namespace moesim::sim {

class ClusterRouter {
 public:
  ClusterRouter(const DeploymentSpec& deployment, RouterPolicy policy);

  // The replica for `req`: in the decode pool (P/D, decode_pool) or the prefill pool, else in
  // pool `pool` ("" or an unknown name: the first pool).
  int32_t pick(const Request& req, bool decode_pool, const std::string& pool = "");

  // What replica `replica_idx` holds for a request (cache_aware): prompt tokens a cached prefix
  // covers, and prompt tokens still to prefill of the requests waiting or running there.
  struct CacheView {
    int64_t cached_tokens = 0;
    int64_t pending_prefill_tokens = 0;
  };
  using CacheProbe = std::function<CacheView(int32_t replica_idx, const Request& req)>;
  // Required by cache_aware before the first pick.
  void set_cache_probe(CacheProbe probe) { cache_probe_ = std::move(probe); }

  // A request joined (+1) or left (-1) replica `replica_idx`.
  void add_outstanding(int32_t replica_idx, int32_t delta) { outstanding_[replica_idx] += delta; }
  int32_t outstanding(int32_t replica_idx) const { return outstanding_[replica_idx]; }
  // Requests held by replicas (waiting, running or in transfer to them).
  int64_t total_outstanding() const;

  // Pool names in declaration order ("default" when implicit) and a pool's outstanding requests.
  std::vector<std::string> pool_names() const;
  int64_t pool_outstanding(const std::string& pool) const;

 private:
  struct Pool {
    std::string name;
    int32_t first = 0, last = 0;  // replicas [first, last)
  };
  DeploymentSpec deployment_;
  RouterPolicy policy_;
  std::vector<Pool> pools_;
  std::vector<int32_t> outstanding_;
  std::map<int32_t, int32_t> session_replica_;
  int32_t rr_next_ = 0;
  CacheProbe cache_probe_;
};

}  // namespace moesim::sim
