// The cluster router on its own: pools, P/D pools, least outstanding with ties to the lowest
// index, round robin, session affinity, and the outstanding counts it keeps.
#include "sim/serving/cluster_router.h"

#include <gtest/gtest.h>

namespace moesim::sim {
namespace {

Request session_turn(int32_t session) {
  Request r;
  r.session = SessionId(session);
  return r;
}

TEST(ClusterRouter, LeastOutstandingWithTiesToTheLowestReplica) {
  DeploymentSpec d;
  d.num_replicas = 3;
  ClusterRouter router(d, RouterPolicy::kLeastOutstanding);
  EXPECT_EQ(router.pick(Request{}, false), 0);
  router.add_outstanding(0, 1);
  EXPECT_EQ(router.pick(Request{}, false), 1);
  router.add_outstanding(1, 1);
  router.add_outstanding(2, 1);
  EXPECT_EQ(router.pick(Request{}, false), 0);
  router.add_outstanding(1, -1);
  EXPECT_EQ(router.pick(Request{}, false), 1);
  EXPECT_EQ(router.total_outstanding(), 2);
  EXPECT_EQ(router.pool_names(), std::vector<std::string>{"default"});
  EXPECT_EQ(router.pool_outstanding("default"), 2);
}

TEST(ClusterRouter, PoolsTakeConsecutiveReplicas) {
  DeploymentSpec d;
  d.num_replicas = 3;
  d.pools = {PoolSpec{"short", 1}, PoolSpec{"long", 2}};
  ClusterRouter router(d, RouterPolicy::kLeastOutstanding);
  EXPECT_EQ(router.pick(Request{}, false, "short"), 0);
  EXPECT_EQ(router.pick(Request{}, false, "long"), 1);
  router.add_outstanding(1, 1);
  EXPECT_EQ(router.pick(Request{}, false, "long"), 2);
  EXPECT_EQ(router.pick(Request{}, false, "unknown"), 0);  // the first pool
  EXPECT_EQ(router.pool_outstanding("long"), 1);
  EXPECT_EQ(router.pool_outstanding("short"), 0);
}

TEST(ClusterRouter, PrefillAndDecodePoolsUnderPd) {
  DeploymentSpec d;
  d.num_replicas = 4;
  d.prefill_replicas = 1;
  ClusterRouter router(d, RouterPolicy::kLeastOutstanding);
  EXPECT_EQ(router.pick(Request{}, false), 0);
  EXPECT_EQ(router.pick(Request{}, true), 1);
  router.add_outstanding(1, 1);
  EXPECT_EQ(router.pick(Request{}, true), 2);
}

TEST(ClusterRouter, RoundRobinCyclesThroughThePool) {
  DeploymentSpec d;
  d.num_replicas = 3;
  ClusterRouter router(d, RouterPolicy::kRoundRobin);
  EXPECT_EQ(router.pick(Request{}, false), 0);
  EXPECT_EQ(router.pick(Request{}, false), 1);
  EXPECT_EQ(router.pick(Request{}, false), 2);
  EXPECT_EQ(router.pick(Request{}, false), 0);
}

TEST(ClusterRouter, SessionAffinityKeepsASessionOnItsFirstReplica) {
  DeploymentSpec d;
  d.num_replicas = 2;
  ClusterRouter router(d, RouterPolicy::kSessionAffinity);
  EXPECT_EQ(router.pick(session_turn(7), false), 0);
  router.add_outstanding(0, 5);
  EXPECT_EQ(router.pick(session_turn(7), false), 0);  // affine, though replica 1 is idle
  EXPECT_EQ(router.pick(session_turn(8), false), 1);  // a new session: least outstanding
  EXPECT_EQ(router.pick(Request{}, false), 1);        // no session: least outstanding
}

}  // namespace
}  // namespace moesim::sim

namespace moesim::sim {
namespace {

// cache_aware: cost = prompt tokens not cached on the replica + prompt tokens pending there.
TEST(ClusterRouter, CacheAwareWeighsTheCachedPrefixAgainstTheQueue) {
  DeploymentSpec d;
  d.num_replicas = 3;
  ClusterRouter router(d, RouterPolicy::kCacheAware);
  std::vector<ClusterRouter::CacheView> view(3);
  router.set_cache_probe([&view](int32_t ri, const Request&) { return view[ri]; });
  Request req;
  req.prompt_tokens = 4096;
  // Nothing cached, nothing queued anywhere: a tie, broken by outstanding, then index.
  EXPECT_EQ(router.pick(req, false), 0);
  router.add_outstanding(0, 1);
  EXPECT_EQ(router.pick(req, false), 1);
  // Replica 2 holds 3584 tokens of the prefix: 512 to compute there against 4096 elsewhere.
  view[2] = {3584, 0};
  EXPECT_EQ(router.pick(req, false), 2);
  // ... unless its queue outweighs the saving: 512 + 4000 > 4096 + 0 on replica 1.
  view[2] = {3584, 4000};
  EXPECT_EQ(router.pick(req, false), 1);
  // Replica 1 holds a shorter prefix (2048) with 1000 queued: 2048 + 1000 < 4512 and < 4096.
  view[1] = {2048, 1000};
  EXPECT_EQ(router.pick(req, false), 1);
  // Under P/D the decode pool is least outstanding.
  DeploymentSpec pd;
  pd.num_replicas = 3;
  pd.prefill_replicas = 2;
  ClusterRouter pd_router(pd, RouterPolicy::kCacheAware);
  pd_router.set_cache_probe([&view](int32_t ri, const Request&) { return view[ri]; });
  view = {{0, 0}, {2048, 0}, {4096, 0}};
  EXPECT_EQ(pd_router.pick(req, false), 1);  // replica 2 is a decode replica
  EXPECT_EQ(pd_router.pick(req, true), 2);
}

}  // namespace
}  // namespace moesim::sim
