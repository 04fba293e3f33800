#include "sim/workload/agent_session.h"

#include <gtest/gtest.h>

namespace moesim::sim {
namespace {

AgentWorkloadSpec base_spec() {
  AgentWorkloadSpec s;
  s.turns = constant_distribution(5, true);
  s.first_input_tokens = constant_distribution(1000, true);
  s.new_input_tokens = constant_distribution(200, true);
  s.reasoning_tokens = constant_distribution(50, true);
  s.answer_tokens = constant_distribution(100, true);
  s.tool_wait_s = constant_distribution(0.25, false);
  return s;
}

TEST(AgentSession, PlanWithoutFailuresHasOneAttemptPerTurn) {
  AgentSessionPlanner planner(base_spec());
  RngStream rng(1, "agent");
  const AgentSessionPlan plan = planner.draw(Domain::kCode, rng);
  EXPECT_EQ(plan.domain, Domain::kCode);
  EXPECT_EQ(plan.end, AgentSessionEnd::kCompleted);
  ASSERT_EQ(plan.turns.size(), 5u);
  EXPECT_EQ(plan.turns[0].new_input_tokens, 1000);
  EXPECT_EQ(plan.turns[1].new_input_tokens, 200);
  for (const AgentTurnPlan& t : plan.turns) {
    ASSERT_EQ(t.attempts.size(), 1u);
    EXPECT_FALSE(t.attempts[0].fails);
    EXPECT_EQ(t.attempts[0].reasoning_tokens, 50);
    EXPECT_EQ(t.attempts[0].answer_tokens, 100);
    EXPECT_EQ(t.attempts[0].tool_wait_ns, 250 * kNsPerMs);
  }
}

// Prompts grow 1000, 1350, 1700 with reasoning kept (+50 reasoning +100 answer +200 input) and
// 1000, 1300, 1600 without: a 1650-token limit cuts the sessions after 2 and 3 turns.
TEST(AgentSession, ContextLimitEndsTheSession) {
  AgentWorkloadSpec spec = base_spec();
  spec.max_context_tokens = 1650;
  RngStream rng(1, "agent");
  {
    const AgentSessionPlan plan = AgentSessionPlanner(spec).draw(Domain::kChat, rng);
    EXPECT_EQ(plan.turns.size(), 2u);
    EXPECT_EQ(plan.end, AgentSessionEnd::kContextFull);
  }
  spec.keep_reasoning_in_context = false;
  {
    const AgentSessionPlan plan = AgentSessionPlanner(spec).draw(Domain::kChat, rng);
    EXPECT_EQ(plan.turns.size(), 3u);
    EXPECT_EQ(plan.end, AgentSessionEnd::kContextFull);
  }
  EXPECT_EQ(carried_output_tokens(spec, AgentAttemptPlan{50, 100, 0, false}), 100);
  spec.keep_reasoning_in_context = true;
  EXPECT_EQ(carried_output_tokens(spec, AgentAttemptPlan{50, 100, 0, false}), 150);
}

TEST(AgentSession, RollbackLimitEndsTheSessionAfterTheLastFailure) {
  AgentWorkloadSpec spec = base_spec();
  spec.rollback_probability = 0.99;
  spec.max_rollbacks_per_turn = 2;
  RngStream rng(1, "agent_rollback_limit");
  int num_limited = 0;
  for (int i = 0; i < 100; ++i) {
    const AgentSessionPlan plan = AgentSessionPlanner(spec).draw(Domain::kChat, rng);
    if (plan.end != AgentSessionEnd::kRollbackLimit) continue;
    ++num_limited;
    const AgentTurnPlan& last = plan.turns.back();
    ASSERT_EQ(last.attempts.size(), 3u);  // the first issue and 2 re-issues, all failed
    for (const AgentAttemptPlan& a : last.attempts) EXPECT_TRUE(a.fails);
  }
  EXPECT_GT(num_limited, 90);
}

// With an unreachable limit each turn takes a geometric number of attempts: mean re-issues per
// turn p / (1 - p).
TEST(AgentSession, RollbacksPerTurnAreGeometric) {
  AgentWorkloadSpec spec = base_spec();
  spec.rollback_probability = 0.3;
  spec.max_rollbacks_per_turn = 1000;
  AgentSessionPlanner planner(spec);
  RngStream rng(1, "agent_rollbacks");
  int64_t num_turns = 0;
  int64_t num_rollbacks = 0;
  for (int i = 0; i < 4000; ++i) {
    const AgentSessionPlan plan = planner.draw(Domain::kChat, rng);
    ASSERT_EQ(plan.end, AgentSessionEnd::kCompleted);
    for (const AgentTurnPlan& t : plan.turns) {
      ++num_turns;
      num_rollbacks += static_cast<int64_t>(t.attempts.size()) - 1;
      for (size_t a = 0; a + 1 < t.attempts.size(); ++a) ASSERT_TRUE(t.attempts[a].fails);
      ASSERT_FALSE(t.attempts.back().fails);
    }
  }
  const double p = 0.3;
  const double mean = p / (1 - p);
  const double sd = std::sqrt(p / ((1 - p) * (1 - p)) / num_turns);
  EXPECT_NEAR(static_cast<double>(num_rollbacks) / num_turns, mean, 5 * sd);
}

}  // namespace
}  // namespace moesim::sim
