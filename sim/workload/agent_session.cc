#include "sim/workload/agent_session.h"

#include "sim/core/horizon.h"

namespace moesim::sim {

AgentSessionPlanner::AgentSessionPlanner(const AgentWorkloadSpec& spec)
    : spec_(spec),
      turns_(spec.turns),
      first_input_tokens_(spec.first_input_tokens),
      new_input_tokens_(spec.new_input_tokens),
      reasoning_tokens_(spec.reasoning_tokens),
      answer_tokens_(spec.answer_tokens),
      tool_wait_s_(spec.tool_wait_s) {}

int64_t carried_output_tokens(const AgentWorkloadSpec& spec, const AgentAttemptPlan& attempt) {
  return attempt.answer_tokens + (spec.keep_reasoning_in_context ? attempt.reasoning_tokens : 0);
}

AgentSessionPlan AgentSessionPlanner::draw(Domain domain, RngStream& rng) const {
  AgentSessionPlan plan;
  plan.domain = domain;
  const int64_t num_turns = turns_.sample_int(rng);
  int64_t prompt_tokens = 0;
  for (int64_t turn = 0; turn < num_turns; ++turn) {
    AgentTurnPlan t;
    t.new_input_tokens =
        turn == 0 ? first_input_tokens_.sample_int(rng) : new_input_tokens_.sample_int(rng);
    const int64_t next_prompt =
        turn == 0
            ? spec_.system_prompt_tokens + t.new_input_tokens
            : prompt_tokens + carried_output_tokens(spec_, plan.turns.back().attempts.back()) +
                  t.new_input_tokens;
    // The parser guarantees that turn 0 fits.
    if (turn > 0 && spec_.max_context_tokens && next_prompt > *spec_.max_context_tokens) {
      plan.end = AgentSessionEnd::kContextFull;
      break;
    }
    prompt_tokens = next_prompt;
    int64_t num_rollbacks = 0;
    while (true) {
      AgentAttemptPlan a;
      a.reasoning_tokens = reasoning_tokens_.sample_int(rng);
      a.answer_tokens = answer_tokens_.sample_int(rng);
      a.tool_wait_ns = checked_duration_ns(tool_wait_s_.sample(rng),
                                           "workload: a tool wait drawn from workload.tool_wait_s",
                                           "bound the distribution with max");
      a.fails = spec_.rollback_probability > 0.0 && rng.uniform01() < spec_.rollback_probability;
      t.attempts.push_back(a);
      if (!a.fails) break;
      if (num_rollbacks == spec_.max_rollbacks_per_turn) {
        plan.end = AgentSessionEnd::kRollbackLimit;
        break;
      }
      ++num_rollbacks;
    }
    plan.turns.push_back(std::move(t));
    if (plan.end == AgentSessionEnd::kRollbackLimit) break;
  }
  return plan;
}

}  // namespace moesim::sim
