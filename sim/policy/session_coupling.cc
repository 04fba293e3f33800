#include "sim/policy/session_coupling.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/check.h"
#include "sim/core/horizon.h"

namespace moesim::sim {

SessionCouplingPolicy::SessionCouplingPolicy(SessionCouplingParams params) : params_(params) {
  const SessionCouplingParams& p = params_;
  MOESIM_CHECK(p.context_weight >= 0 && p.turn_weight >= 0 && p.think_weight >= 0,
               "negative coupling weight");
  MOESIM_CHECK(p.train_context_tokens > 0 && p.reference_turns > 0 && p.think_budget_tokens > 0,
               "non-positive coupling reference");
  MOESIM_CHECK(p.kappa > 0 && p.kappa_safe_fraction > 0 && p.kappa_safe_fraction <= 1,
               "coupling thresholds");
  MOESIM_CHECK(p.damping_gain >= 0 && p.summary_tokens >= 1 && p.summary_tokens_per_s > 0,
               "damping or summary parameters");
  MOESIM_CHECK(p.system_prompt_tokens >= 0, "negative system prompt");
}

CouplingCheck SessionCouplingPolicy::check(double context_tokens, double turn_count,
                                           double think_tokens) const {
  const SessionCouplingParams& p = params_;
  CouplingCheck c;
  c.rho = p.context_weight * context_tokens / p.train_context_tokens +
          p.turn_weight * turn_count / p.reference_turns +
          p.think_weight * think_tokens / p.think_budget_tokens;
  c.zone = c.rho < kappa_safe() ? CouplingZone::kSafe
           : c.rho < p.kappa    ? CouplingZone::kWarning
                                : CouplingZone::kCritical;
  c.health = std::max(0.0, 1.0 - c.rho / p.kappa);
  const double origin = p.damping_origin == DampingOrigin::kKappa ? p.kappa : kappa_safe();
  c.eta = c.rho <= origin ? 1.0 : 1.0 / (1.0 + p.damping_gain * std::sqrt(c.rho - origin));
  return c;
}

void SessionCouplingPolicy::on_arrival(PolicyContext& ctx, Request& request,
                                       AdmissionDecision& decision) {
  if (!request.session.valid()) return;
  Session& s = sessions_[request.session.value];
  if (s.last_turn_idx < 0) {
    s.first_turn_idx = request.turn_idx;
    s.head_tokens = request.prompt_tokens;
  } else if (request.turn_idx > s.last_turn_idx && params_.keep_reasoning_in_context) {
    // The previous turn succeeded (this is not a re-issue of it): its reasoning is in context.
    s.think_history_tokens += s.last_reasoning_tokens;
  }
  s.last_turn_idx = request.turn_idx;
  s.last_reasoning_tokens = request.reasoning_tokens;

  // The turn as the session presents it now (the generator's context minus what was removed).
  const int64_t prompt0 = request.prompt_tokens - s.removed_tokens;
  const int64_t reused0 = request.reused_prefix_tokens - s.removed_tokens;
  const int64_t new_tokens = request.prompt_tokens - request.reused_prefix_tokens;
  MOESIM_CHECK(prompt0 >= 1 && reused0 >= 0 && new_tokens >= 0, "session context underflow");

  const CouplingCheck c =
      check(static_cast<double>(prompt0 + request.output_tokens),
            static_cast<double>(request.turn_idx - s.first_turn_idx + 1),
            static_cast<double>(s.think_history_tokens + request.reasoning_tokens));
  ++num_checks_;
  rho_sum_ += c.rho;
  rho_max_ = std::max(rho_max_, c.rho);
  health_sum_ += c.health;
  health_min_ = std::min(health_min_, c.health);
  ctx.actions.count_action(c.zone == CouplingZone::kSafe      ? "coupling_safe"
                           : c.zone == CouplingZone::kWarning ? "coupling_warning"
                                                              : "coupling_critical");

  int64_t prompt = prompt0, reused = reused0;
  int64_t changed_from = -1;  // first token whose content changes this turn (-1: none)
  if (c.zone == CouplingZone::kWarning) {
    const int64_t kept = std::llround(c.eta * static_cast<double>(s.think_history_tokens));
    const int64_t removed = s.think_history_tokens - kept;
    if (removed > 0) {
      // The oldest reasoning goes: it starts right after the first prompt since (re)start.
      MOESIM_CHECK(reused0 >= removed, "removed reasoning outside the re-used prefix");
      prompt -= removed;
      reused -= removed;
      changed_from = std::min(s.head_tokens, prompt);
      s.removed_tokens += removed;
      s.think_history_tokens = kept;
      tokens_removed_damp_ += removed;
      ctx.actions.count_action("coupling_damp");
    }
  } else if (c.zone == CouplingZone::kCritical) {
    const int64_t system = std::min(params_.system_prompt_tokens, prompt0 - new_tokens);
    const int64_t history = prompt0 - system - new_tokens;
    if (!params_.rebuild || history <= 0) {
      decision.reject = true;
      decision.reject_reason = "coupling_critical";
      ctx.actions.count_action("coupling_reject");
      sessions_.erase(request.session.value);
      return;
    }
    const int64_t summary = std::min(params_.summary_tokens, history);
    prompt = system + summary + new_tokens;
    reused = system;
    changed_from = system;
    s.removed_tokens = request.prompt_tokens - prompt;
    s.think_history_tokens = 0;
    s.first_turn_idx = request.turn_idx;
    s.head_tokens = prompt;
    tokens_removed_fuse_ += prompt0 - prompt;
    const double delay_s = static_cast<double>(summary) / params_.summary_tokens_per_s;
    summary_delay_s_ += delay_s;
    const SimTime delay_ns = checked_duration_ns(
        delay_s,
        "policies.session_coupling: summarising " + std::to_string(summary) +
            " tokens at summary_tokens_per_s = " + format_number(params_.summary_tokens_per_s),
        "raise summary_tokens_per_s");
    decision.delay_ns = add_within_horizon(
        decision.delay_ns, delay_ns, "policies.session_coupling: the request's admission delay");
    ctx.actions.count_action("coupling_fuse");
  }
  if (!s.rewritten && changed_from < 0) return;  // untouched so far: the generator's prompt

  // Blocks that keep their hashes: full blocks of the prompt last issued (the generator's prompt
  // until the first rewrite) that end before the first changed token.
  std::vector<uint64_t> base;
  int64_t kept_blocks = 0;
  if (s.rewritten) {
    base = std::move(s.eff_hashes);
    kept_blocks = std::min(s.eff_prompt_tokens, reused) / kPrefixBlockTokens;
  } else {
    base = request.prefix_block_hashes;
    kept_blocks = prompt0 / kPrefixBlockTokens;
  }
  if (changed_from >= 0) kept_blocks = std::min(kept_blocks, changed_from / kPrefixBlockTokens);
  kept_blocks =
      std::min({kept_blocks, prompt / kPrefixBlockTokens, static_cast<int64_t>(base.size())});
  rewrite_prompt(request, prompt, reused, base, kept_blocks, hashes_);
  s.rewritten = true;
  s.eff_prompt_tokens = prompt;
  s.eff_hashes = request.prefix_block_hashes;
}

void SessionCouplingPolicy::on_reject(PolicyContext& ctx, const Request& request) {
  if (request.session.valid()) sessions_.erase(request.session.value);
}

void SessionCouplingPolicy::on_finish(PolicyContext& ctx) {
  const std::string p = "session_coupling.";
  const double n = static_cast<double>(std::max<int64_t>(num_checks_, 1));
  ctx.actions.report_metric(p + "checks", static_cast<double>(num_checks_));
  ctx.actions.report_metric(p + "rho_mean", rho_sum_ / n);
  ctx.actions.report_metric(p + "rho_max", rho_max_);
  ctx.actions.report_metric(p + "health_mean", num_checks_ > 0 ? health_sum_ / n : 1.0);
  ctx.actions.report_metric(p + "health_min", health_min_);
  ctx.actions.report_metric(p + "tokens_removed_damp", static_cast<double>(tokens_removed_damp_));
  ctx.actions.report_metric(p + "tokens_removed_fuse", static_cast<double>(tokens_removed_fuse_));
  ctx.actions.report_metric(p + "summary_delay_s", summary_delay_s_);
}

std::unique_ptr<ServingPolicy> make_session_coupling_policy(TomlTable& table,
                                                            const Scenario& scenario) {
  SessionCouplingParams p;
  p.context_weight = table.get_double_in_or("context_weight", 0, 1e6, p.context_weight);
  p.turn_weight = table.get_double_in_or("turn_weight", 0, 1e6, p.turn_weight);
  p.think_weight = table.get_double_in_or("think_weight", 0, 1e6, p.think_weight);
  p.train_context_tokens =
      table.get_double_in_or("train_context_tokens", 1, 1e12, p.train_context_tokens);
  p.reference_turns = table.get_double_in_or("reference_turns", 1e-6, 1e9, p.reference_turns);
  p.think_budget_tokens =
      table.get_double_in_or("think_budget_tokens", 1, 1e12, p.think_budget_tokens);
  p.kappa = table.get_double_in_or("kappa", 1e-9, 1e9, p.kappa);
  p.kappa_safe_fraction =
      table.get_double_in_or("kappa_safe_fraction", 1e-9, 1.0, p.kappa_safe_fraction);
  p.damping_gain = table.get_double_in_or("damping_gain", 0, 1e9, p.damping_gain);
  p.damping_origin =
      table.get_enum_or("damping_origin", {"kappa_safe", "kappa"}, "kappa_safe") == "kappa"
          ? DampingOrigin::kKappa
          : DampingOrigin::kKappaSafe;
  p.rebuild = table.get_bool_or("rebuild", p.rebuild);
  if (p.rebuild) {
    p.summary_tokens = table.get_int_in_or("summary_tokens", 1, int64_t{1} << 40, p.summary_tokens);
    p.summary_tokens_per_s =
        table.get_double_in_or("summary_tokens_per_s", 1e-6, 1e12, p.summary_tokens_per_s);
  }
  if (p.context_weight + p.turn_weight + p.think_weight <= 0) {
    table.fail_table("context_weight, turn_weight and think_weight are all 0: rho is always 0");
  }
  if (scenario.workload.kind == WorkloadKind::kAgent) {
    p.system_prompt_tokens = scenario.workload.agent.system_prompt_tokens;
    p.keep_reasoning_in_context = scenario.workload.agent.keep_reasoning_in_context;
  }
  return std::make_unique<SessionCouplingPolicy>(p);
}

}  // namespace moesim::sim
