// The serving front: router policies (ties, one round-robin counter over all pools, session
// affinity), pools chosen by queue isolation and the long-context cap, the concurrency cap's
// overrides, and the policies the engine refuses.
#include "engine/serve/admission.h"

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace moesim::engine::serve {
namespace {

SchedulerConfig base_config() {
  SchedulerConfig c;
  c.max_batch_tokens_per_gpu = 512;
  c.kv_block_tokens = 64;
  c.kv_blocks_per_rank = 1000;
  c.max_context_tokens = 200000;
  return c;
}

Arrival arrival(int64_t id, int64_t prompt, int64_t session = -1) {
  return Arrival{ServeRequest{id, 0, prompt, 4}, session};
}

std::vector<int64_t> replicas_of(ServeFront& front, const std::vector<Arrival>& arrivals) {
  std::vector<int64_t> out;
  for (const Arrival& a : arrivals) out.push_back(front.arrive(a).replica);
  return out;
}

TEST(ServeFront, LeastOutstandingPrefersFewerThenTheLowestIndex) {
  AdmissionConfig config;
  ServeFront front(config, base_config(), {1, 1, 1});
  EXPECT_EQ(replicas_of(front, {arrival(0, 10), arrival(1, 10), arrival(2, 10), arrival(3, 10)}),
            (std::vector<int64_t>{0, 1, 2, 0}));
  // Replica 1 drains its request: it has the fewest outstanding.
  Scheduler& s1 = front.scheduler(1);
  for (int i = 0; i < 4; ++i) s1.finish_step(s1.plan_step());
  EXPECT_TRUE(s1.idle());
  EXPECT_EQ(front.arrive(arrival(4, 10)).replica, 1);
}

TEST(ServeFront, RoundRobinKeepsOneCounterOverAllPools) {
  AdmissionConfig config;
  config.router = RouterPolicy::kRoundRobin;
  config.pools = {{"short", {0, 1}}, {"long", {2}}};
  config.queue_isolation = QueueIsolation{8192, true, "short", "long"};
  ServeFront front(config, base_config(), {1, 1, 1});
  // Counter 0 -> short[0], 1 -> long[0], 2 -> short[0] (not short[1]), 3 -> short[1].
  EXPECT_EQ(replicas_of(front, {arrival(0, 10), arrival(1, 9000), arrival(2, 10), arrival(3, 10)}),
            (std::vector<int64_t>{0, 2, 0, 1}));
}

TEST(ServeFront, SessionAffinityKeepsASessionOnItsFirstReplica) {
  AdmissionConfig config;
  config.router = RouterPolicy::kSessionAffinity;
  ServeFront front(config, base_config(), {1, 1});
  EXPECT_EQ(front.arrive(arrival(0, 10, 5)).replica, 0);
  EXPECT_EQ(front.arrive(arrival(1, 10)).replica, 1);     // no session: least outstanding
  EXPECT_EQ(front.arrive(arrival(2, 10, 5)).replica, 0);  // its session's replica, though busier
  EXPECT_EQ(front.arrive(arrival(3, 10, 6)).replica, 1);  // a new session: least outstanding
}

TEST(ServeFront, QueueIsolationClassesByPromptLength) {
  AdmissionConfig config;
  config.pools = {{"short", {0}}, {"long", {1}}};
  config.queue_isolation = QueueIsolation{8192, true, "short", "long"};
  ServeFront front(config, base_config(), {1, 1});
  const ArrivalDecision just_short = front.arrive(arrival(0, 8191));
  EXPECT_EQ(just_short.pool, "short");
  EXPECT_EQ(just_short.replica, 0);
  const ArrivalDecision just_long = front.arrive(arrival(1, 8192));
  EXPECT_EQ(just_long.pool, "long");
  EXPECT_EQ(just_long.replica, 1);
  // isolate = false routes nothing: declared pools without a routing policy use the first one.
  config.queue_isolation->isolate = false;
  ServeFront measuring(config, base_config(), {1, 1});
  EXPECT_EQ(measuring.arrive(arrival(0, 9000)).pool, "short");
}

TEST(ServeFront, LongContextCapRejectsOrRoutesPromptsOverTheThreshold) {
  AdmissionConfig config;
  config.long_context_cap = LongContextCap{1000, LongContextAction::kReject, "", ""};
  ServeFront rejecting(config, base_config(), {1});
  const ArrivalDecision over = rejecting.arrive(arrival(0, 1001));
  EXPECT_FALSE(over.queued());
  EXPECT_EQ(over.reject_reason, "long_context");
  EXPECT_EQ(over.replica, -1);
  EXPECT_TRUE(rejecting.arrive(arrival(1, 1000)).queued());
  // Pools without a short_pool: the others go to the first pool.
  config.pools = {{"main", {1}}, {"spare", {0}}};
  ServeFront first_pool(config, base_config(), {1, 1});
  EXPECT_EQ(first_pool.arrive(arrival(0, 10)).replica, 1);

  config.pools = {{"main", {0}}, {"long", {1}}};
  config.long_context_cap = LongContextCap{1000, LongContextAction::kRoute, "long", "main"};
  ServeFront routing(config, base_config(), {1, 1});
  EXPECT_EQ(routing.arrive(arrival(0, 1001)).replica, 1);
  EXPECT_EQ(routing.arrive(arrival(1, 1000)).replica, 0);
  EXPECT_EQ(routing.arrive(arrival(2, 5)).pool, "main");
}

TEST(ServeFront, ConcurrencyCapReplacesTheSchedulerLimits) {
  AdmissionConfig config;
  config.concurrency_cap = ConcurrencyCap{32, 4096};
  ServeFront front(config, base_config(), {2, 4});
  EXPECT_EQ(front.scheduler(0).config().max_seqs, 32);
  EXPECT_EQ(front.scheduler(0).config().max_step_tokens, 4096);
  EXPECT_EQ(front.scheduler(0).config().num_ranks, 2);
  EXPECT_EQ(front.scheduler(1).config().num_ranks, 4);
  config.concurrency_cap = ConcurrencyCap{0, 0};
  EXPECT_THROW(ServeFront(config, base_config(), {1}), std::invalid_argument);
}

TEST(ServeFront, SchedulerRejectionsComeBackWithTheirReason) {
  AdmissionConfig config;
  ServeFront front(config, base_config(), {1});
  const ArrivalDecision d = front.arrive(Arrival{ServeRequest{0, 0, 199999, 2}, -1});
  EXPECT_EQ(d.replica, 0);
  EXPECT_EQ(d.result, AddResult::kRejectedContextTooLong);
  EXPECT_EQ(d.reject_reason, "context_too_long");
}

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(ServeFront, RefusesWhatTheEngineCannotRun) {
  EXPECT_NE(refusal([] { parse_router_policy("cache_aware"); }).find("needs a prefix cache"),
            std::string::npos);
  EXPECT_NE(refusal([] { parse_router_policy("random"); }).find("valid: round_robin"),
            std::string::npos);
  EXPECT_NE(refusal([] { parse_long_context_action("summarize"); }).find("not supported"),
            std::string::npos);
  EXPECT_NE(refusal([] { parse_long_context_action("offline"); }).find("not supported"),
            std::string::npos);
  EXPECT_EQ(parse_router_policy("session_affinity"), RouterPolicy::kSessionAffinity);

  AdmissionConfig config;
  config.pools = {{"a", {0}}, {"b", {0}}};
  EXPECT_NE(refusal([&] { ServeFront(config, base_config(), {1}); }).find("more than one pool"),
            std::string::npos);
  config.pools = {{"a", {0}}, {"b", {1}}};
  config.queue_isolation = QueueIsolation{8192, true, "a", "c"};
  EXPECT_NE(refusal([&] {
              ServeFront(config, base_config(), {1, 1});
            }).find("'c' is not declared"),
            std::string::npos);
  config.queue_isolation.reset();
  config.concurrency_cap = ConcurrencyCap{-1, 0};
  EXPECT_NE(refusal([&] {
              ServeFront(config, base_config(), {1, 1});
            }).find("at least one value must be > 0"),
            std::string::npos);
}

}  // namespace
}  // namespace moesim::engine::serve
