// Multi-turn agent sessions. A session's whole plan (turn count, token counts, tool waits, which
// attempts fail) is drawn when it arrives, in a fixed order from the workload stream; only the
// timing of later turns depends on the serving layer (a turn arrives a tool wait after the
// previous one completes), so two policies compared on one seed see the same sessions. How the
// context grows turn by turn, what is re-used as prefix and how a failed attempt is rolled back:
// docs/workload.md, `kind = "agent"`.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/core/ids.h"
#include "sim/core/rng.h"
#include "sim/core/time.h"
#include "sim/workload/request.h"
#include "sim/workload/value_distribution.h"
#include "sim/workload/workload_spec.h"

namespace moesim::sim {

struct AgentAttemptPlan {
  int64_t reasoning_tokens = 0;
  int64_t answer_tokens = 0;
  // Delay between this attempt's completion and the session's next request.
  SimTime tool_wait_ns = 0;
  // Whether the harness rejects this attempt (rollback, or end of session at the limit).
  bool fails = false;
};

struct AgentTurnPlan {
  // Tokens added to the context before this turn (turn 0: the task after the system prompt).
  int64_t new_input_tokens = 0;
  // Attempts in issue order: every attempt but the last fails; the last fails only when the
  // session ends at the rollback limit.
  std::vector<AgentAttemptPlan> attempts;
};

enum class AgentSessionEnd {
  kCompleted,      // all planned turns done
  kContextFull,    // the next prompt would exceed max_context_tokens
  kRollbackLimit,  // a turn failed after max_rollbacks_per_turn rollbacks
};

struct AgentSessionPlan {
  Domain domain = Domain::kChat;
  std::vector<AgentTurnPlan> turns;  // at least one
  AgentSessionEnd end = AgentSessionEnd::kCompleted;
};

// The distributions of an AgentWorkloadSpec, built once.
class AgentSessionPlanner {
 public:
  explicit AgentSessionPlanner(const AgentWorkloadSpec& spec);

  // Draws a plan (domain chosen by the caller). Draw order: number of turns; then per turn its
  // new input tokens and, per attempt, reasoning, answer, tool wait and (when
  // rollback_probability > 0) the failure draw.
  AgentSessionPlan draw(Domain domain, RngStream& rng) const;

  const AgentWorkloadSpec& spec() const { return spec_; }

 private:
  AgentWorkloadSpec spec_;
  ValueDistribution turns_;
  ValueDistribution first_input_tokens_;
  ValueDistribution new_input_tokens_;
  ValueDistribution reasoning_tokens_;
  ValueDistribution answer_tokens_;
  ValueDistribution tool_wait_s_;
};

// Tokens of turn `turn`'s output that stay in the context of the next turn.
int64_t carried_output_tokens(const AgentWorkloadSpec& spec, const AgentAttemptPlan& attempt);

}  // namespace moesim::sim
