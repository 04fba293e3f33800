// Session coupling monitor and fuse for long agent sessions.
//
// Before each turn the policy computes the session's coupling density rho from its context,
// its turns since the session (re)started and the reasoning tokens it keeps, and acts by zone:
// SAFE proceeds, WARNING proceeds with damping (only the newest eta fraction of the reasoning
// history is kept), CRITICAL fuses and rebuilds the session from a summary after the summary's
// generation delay (or rejects the turn). The workload generator keeps growing its own context,
// so the policy remembers per session what it removed and the prefix-block hashes it issued:
// later turns are rewritten consistently and changed content never hits the prefix cache.
// docs/policies/session_coupling.md has the formula, the zones and the damping law.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "sim/config/toml_source.h"
#include "sim/policy/prompt_rewrite.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/serving_policy.h"

namespace moesim::sim {

enum class CouplingZone { kSafe, kWarning, kCritical };
enum class DampingOrigin { kKappaSafe, kKappa };

struct SessionCouplingParams {
  double context_weight = 0.4;           // a, >= 0
  double turn_weight = 0.3;              // b, >= 0
  double think_weight = 0.3;             // c, >= 0
  double train_context_tokens = 131072;  // L_train, > 0
  double reference_turns = 15;           // N_ref, > 0
  double think_budget_tokens = 32768;    // T_budget, > 0
  double kappa = 1.2732395447351628;     // 4 / pi, > 0
  double kappa_safe_fraction = 0.75;     // kappa_safe = fraction * kappa, in (0, 1]
  double damping_gain = 0.4;             // >= 0
  DampingOrigin damping_origin = DampingOrigin::kKappaSafe;
  bool rebuild = true;                // CRITICAL: fuse and rebuild (else reject)
  int64_t summary_tokens = 4096;      // >= 1
  double summary_tokens_per_s = 100;  // generation rate of the summary, > 0
  // From the workload: the shared system prompt (kept through a rebuild) and whether reasoning
  // stays in context.
  int64_t system_prompt_tokens = 0;
  bool keep_reasoning_in_context = true;
};

// One check's inputs and verdict.
struct CouplingCheck {
  double rho = 0;
  CouplingZone zone = CouplingZone::kSafe;
  double health = 1;
  double eta = 1;
};

class SessionCouplingPolicy final : public ServingPolicy {
 public:
  explicit SessionCouplingPolicy(SessionCouplingParams params);
  std::string_view name() const override { return "session_coupling"; }
  // Checks a session's turn and applies the zone's action (requests outside sessions pass).
  void on_arrival(PolicyContext& ctx, Request& request, AdmissionDecision& decision) override;
  // A rejected turn ends its session (the workload abandons it): its state goes.
  void on_reject(PolicyContext& ctx, const Request& request) override;
  // Reports rho / health statistics, tokens removed and summary time.
  void on_finish(PolicyContext& ctx) override;

  // rho, zone, health and eta for a turn ending with `context_tokens` in context, the
  // `turn_count`-th turn since the session (re)started, `think_tokens` reasoning in context.
  CouplingCheck check(double context_tokens, double turn_count, double think_tokens) const;
  double kappa_safe() const { return params_.kappa_safe_fraction * params_.kappa; }

 private:
  struct Session {
    int64_t removed_tokens = 0;        // generator's context minus the effective context
    int64_t think_history_tokens = 0;  // earlier turns' reasoning still in the context
    int32_t first_turn_idx = 0;        // turn at which the session (re)started
    int32_t last_turn_idx = -1;        // last turn seen (-1: none)
    int64_t last_reasoning_tokens = 0;
    int64_t head_tokens =
        0;                   // tokens before the oldest reasoning: the first prompt since (re)start
    bool rewritten = false;  // prompts come from eff_hashes from now on
    int64_t eff_prompt_tokens = 0;  // the prompt last issued (when rewritten)
    std::vector<uint64_t> eff_hashes;
  };

  SessionCouplingParams params_;
  std::map<int32_t, Session> sessions_;  // by session id
  PolicyHashStream hashes_{1};
  // Statistics over checks.
  int64_t num_checks_ = 0;
  double rho_sum_ = 0, rho_max_ = 0, health_sum_ = 0, health_min_ = 1;
  int64_t tokens_removed_damp_ = 0, tokens_removed_fuse_ = 0;
  double summary_delay_s_ = 0;
};

// Parses [policies.session_coupling]; the system prompt and keep_reasoning_in_context come from
// the scenario's agent workload (other workloads: 0 and true).
std::unique_ptr<ServingPolicy> make_session_coupling_policy(TomlTable& table,
                                                            const Scenario& scenario);

}  // namespace moesim::sim
