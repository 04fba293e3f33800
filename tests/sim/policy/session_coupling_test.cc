// Session coupling: the density formula, zones, health and damping (both resolutions of the
// WARNING zone), the per-session rewriting that keeps later turns and the prefix cache
// consistent, fuse-and-rebuild with its summary cost, reject without rebuild, and a whole run.
#include "sim/policy/session_coupling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "sim/config/config_error.h"
#include "tests/sim/policy/fake_policy_context.h"
#include "tests/sim/policy/policy_test_util.h"
#include "tests/sim/serving/test_scenarios.h"

namespace moesim::sim {
namespace {

using testing::FakePolicyContext;

TEST(SessionCouplingTest, DensityZonesHealthAndDampingWithDefaults) {
  SessionCouplingPolicy p{SessionCouplingParams{}};
  const double kappa = 4 / std::numbers::pi;
  EXPECT_NEAR(p.kappa_safe(), 0.75 * kappa, 1e-12);
  // rho = 0.4 * 65536 / 131072 + 0.3 * 15 / 15 + 0.3 * 32768 / 32768 = 0.8.
  CouplingCheck safe = p.check(65536, 15, 32768);
  EXPECT_NEAR(safe.rho, 0.8, 1e-12);
  EXPECT_EQ(safe.zone, CouplingZone::kSafe);
  EXPECT_NEAR(safe.health, 1 - 0.8 / kappa, 1e-12);
  EXPECT_EQ(safe.eta, 1.0);
  // rho = 1.0: WARNING; damping measured from kappa_safe (the default).
  CouplingCheck warn = p.check(131072, 15, 32768);
  EXPECT_NEAR(warn.rho, 1.0, 1e-12);
  EXPECT_EQ(warn.zone, CouplingZone::kWarning);
  EXPECT_NEAR(warn.eta, 1 / (1 + 0.4 * std::sqrt(1.0 - 0.75 * kappa)), 1e-12);
  // rho = 1.4: CRITICAL, health 0 beyond kappa.
  CouplingCheck crit = p.check(262144, 15, 32768);
  EXPECT_EQ(crit.zone, CouplingZone::kCritical);
  EXPECT_NEAR(crit.health, 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(p.check(600000, 15, 32768).health, 0.0);

  // The formula as published: eta is 1 throughout WARNING and below 1 only past kappa.
  SessionCouplingParams lit;
  lit.damping_origin = DampingOrigin::kKappa;
  SessionCouplingPolicy q{lit};
  EXPECT_EQ(q.check(131072, 15, 32768).eta, 1.0);
  EXPECT_NEAR(q.check(262144, 15, 32768).eta, 1 / (1 + 0.4 * std::sqrt(1.4 - kappa)), 1e-12);
  // Zone boundaries: rho exactly kappa_safe is WARNING, exactly kappa is CRITICAL.
  SessionCouplingParams unit;
  unit.context_weight = 0;
  unit.turn_weight = 1;
  unit.think_weight = 0;
  unit.reference_turns = 1;
  unit.kappa = 2;
  unit.kappa_safe_fraction = 0.5;
  SessionCouplingPolicy u{unit};
  EXPECT_EQ(u.check(0, 0.999, 0).zone, CouplingZone::kSafe);
  EXPECT_EQ(u.check(0, 1, 0).zone, CouplingZone::kWarning);
  EXPECT_EQ(u.check(0, 2, 0).zone, CouplingZone::kCritical);
}

// Builds a session's requests as the workload generator does (reasoning kept in context,
// 1024-token system prompt, fresh hashes counted from 0).
class SessionDriver {
 public:
  Request first(int64_t task_tokens, int64_t reasoning, int64_t answer) {
    prompt_ = 1024 + task_tokens;
    hashes_.clear();
    extend();
    return make(0, 0, 0, reasoning, answer);
  }
  Request next_turn(int64_t new_tokens, int64_t reasoning, int64_t answer) {
    const int64_t reused = prompt_ + last_output_;
    hashes_.resize(static_cast<size_t>(prompt_ / kPrefixBlockTokens));
    prompt_ += last_output_ + new_tokens;
    extend();
    return make(turn_ + 1, 0, reused, reasoning, answer);
  }
  Request reissue(int64_t reasoning, int64_t answer) {
    return make(turn_, attempt_ + 1, prompt_, reasoning, answer);
  }

 private:
  void extend() {
    while (static_cast<int64_t>(hashes_.size()) < num_prefix_blocks(prompt_)) {
      hashes_.push_back(next_hash_++);
    }
  }
  Request make(int32_t turn, int32_t attempt, int64_t reused, int64_t reasoning, int64_t answer) {
    turn_ = turn;
    attempt_ = attempt;
    last_output_ = reasoning + answer;
    Request r;
    r.id = RequestId(next_id_++);
    r.session = SessionId(7);
    r.turn_idx = turn;
    r.attempt_idx = attempt;
    r.prompt_tokens = prompt_;
    r.reused_prefix_tokens = reused;
    r.reasoning_tokens = reasoning;
    r.output_tokens = reasoning + answer;
    r.prefix_block_hashes = hashes_;
    return r;
  }
  int64_t prompt_ = 0, last_output_ = 0;
  int32_t turn_ = 0, attempt_ = 0, next_id_ = 0;
  uint64_t next_hash_ = 0;
  std::vector<uint64_t> hashes_;
};

// rho = T_think / 1000: SAFE below 500, WARNING below 1000, CRITICAL from 1000; damping gain 1.
SessionCouplingParams think_only(DampingOrigin origin) {
  SessionCouplingParams p;
  p.context_weight = 0;
  p.turn_weight = 0;
  p.think_weight = 1;
  p.think_budget_tokens = 1000;
  p.kappa = 1;
  p.kappa_safe_fraction = 0.5;
  p.damping_gain = 1;
  p.damping_origin = origin;
  p.summary_tokens = 512;
  p.summary_tokens_per_s = 100;
  p.system_prompt_tokens = 1024;
  return p;
}

TEST(SessionCouplingTest, WarningDampsFromKappaSafeAndLaterTurnsStayConsistent) {
  SessionCouplingPolicy p{think_only(DampingOrigin::kKappaSafe)};
  FakePolicyContext ctx;
  SessionDriver gen;
  AdmissionDecision d;
  Request t0 = gen.first(600, 200, 100);  // prompt 1624, T 200: SAFE
  const Request t0_in = t0;
  p.on_arrival(ctx, t0, d);
  EXPECT_EQ(t0.prompt_tokens, t0_in.prompt_tokens);
  EXPECT_EQ(t0.prefix_block_hashes, t0_in.prefix_block_hashes);
  Request t1 = gen.next_turn(200, 200, 100);  // prompt 2124, T 400: SAFE
  p.on_arrival(ctx, t1, d);
  EXPECT_EQ(t1.prompt_tokens, 2124);
  EXPECT_EQ(ctx.action("coupling_safe"), 2);

  // Turn 2: prompt 2624 (re-used 2424), T = 400 + 200 = 600: WARNING, eta = 1 / (1 + sqrt(0.1)).
  Request t2 = gen.next_turn(200, 200, 100);
  const Request t2_in = t2;
  p.on_arrival(ctx, t2, d);
  EXPECT_EQ(ctx.action("coupling_warning"), 1);
  EXPECT_EQ(ctx.action("coupling_damp"), 1);
  const int64_t kept = std::llround(400 / (1 + std::sqrt(0.1)));  // 304
  const int64_t removed = 400 - kept;
  EXPECT_EQ(t2.prompt_tokens, 2624 - removed);
  EXPECT_EQ(t2.reused_prefix_tokens, 2424 - removed);
  ASSERT_EQ(static_cast<int64_t>(t2.prefix_block_hashes.size()),
            num_prefix_blocks(t2.prompt_tokens));
  // The dropped reasoning starts after turn 0's prompt (1624 tokens): its 3 full blocks keep
  // their hashes, every later block is new content.
  for (int b = 0; b < 3; ++b) EXPECT_EQ(t2.prefix_block_hashes[b], t2_in.prefix_block_hashes[b]);
  for (size_t b = 3; b < t2.prefix_block_hashes.size(); ++b) {
    EXPECT_GE(t2.prefix_block_hashes[b], uint64_t{1} << 63);
  }

  // Turn 3: the generator's prompt is 3124 (re-used 2924); the session presents it minus what was
  // removed. T = 304 + 200 + 200 = 704: damped again.
  Request t3 = gen.next_turn(200, 200, 100);
  p.on_arrival(ctx, t3, d);
  const int64_t kept3 = std::llround(504 / (1 + std::sqrt(0.204)));
  const int64_t removed_total = removed + (504 - kept3);
  EXPECT_EQ(t3.prompt_tokens, 3124 - removed_total);
  EXPECT_EQ(t3.reused_prefix_tokens, 2924 - removed_total);
  EXPECT_EQ(ctx.action("coupling_damp"), 2);

  // A re-issue of turn 3 (rolled back, no reasoning): SAFE, same rewritten prompt, and every full
  // block keeps the hash turn 3 was given, so the prefix cache hits them.
  Request t3b = gen.reissue(0, 100);
  p.on_arrival(ctx, t3b, d);
  EXPECT_EQ(t3b.prompt_tokens, t3.prompt_tokens);
  EXPECT_EQ(t3b.reused_prefix_tokens, t3.prompt_tokens);
  const int64_t full = t3.prompt_tokens / kPrefixBlockTokens;
  for (int64_t b = 0; b < full; ++b) {
    EXPECT_EQ(t3b.prefix_block_hashes[b], t3.prefix_block_hashes[b]) << b;
  }
  EXPECT_EQ(d.delay_ns, 0);
  EXPECT_FALSE(d.reject);

  ctx.now_ns = 0;
  p.on_finish(ctx);
  EXPECT_EQ(ctx.metrics.at("session_coupling.checks"), 5);
  EXPECT_EQ(ctx.metrics.at("session_coupling.tokens_removed_damp"), removed_total);
}

TEST(SessionCouplingTest, WarningProceedsUndampedWhenDampingStartsAtKappa) {
  SessionCouplingPolicy p{think_only(DampingOrigin::kKappa)};
  FakePolicyContext ctx;
  SessionDriver gen;
  AdmissionDecision d;
  Request t0 = gen.first(600, 200, 100);
  p.on_arrival(ctx, t0, d);
  Request t1 = gen.next_turn(200, 200, 100);
  p.on_arrival(ctx, t1, d);
  Request t2 = gen.next_turn(200, 200, 100);  // T 600: WARNING, eta 1
  const Request t2_in = t2;
  p.on_arrival(ctx, t2, d);
  EXPECT_EQ(ctx.action("coupling_warning"), 1);
  EXPECT_EQ(ctx.action("coupling_damp"), 0);
  EXPECT_EQ(t2.prompt_tokens, t2_in.prompt_tokens);
  EXPECT_EQ(t2.prefix_block_hashes, t2_in.prefix_block_hashes);
}

TEST(SessionCouplingTest, CriticalFusesAndRebuildsFromASummary) {
  SessionCouplingPolicy p{think_only(DampingOrigin::kKappaSafe)};
  FakePolicyContext ctx;
  SessionDriver gen;
  AdmissionDecision d0;
  Request t0 = gen.first(3000, 100, 100);  // prompt 4024: SAFE
  p.on_arrival(ctx, t0, d0);
  // Turn 1: prompt 4024 + 200 + 300 = 4524 (re-used 4224, new 300); T = 100 + 900: CRITICAL.
  Request t1 = gen.next_turn(300, 900, 100);
  const Request t1_in = t1;
  AdmissionDecision d;
  p.on_arrival(ctx, t1, d);
  EXPECT_EQ(ctx.action("coupling_critical"), 1);
  EXPECT_EQ(ctx.action("coupling_fuse"), 1);
  EXPECT_FALSE(d.reject);
  // System prompt + 512-token summary + the turn's 300 new tokens; the summary's generation is
  // charged as delay (512 tokens at 100 tokens/s).
  EXPECT_EQ(t1.prompt_tokens, 1024 + 512 + 300);
  EXPECT_EQ(t1.reused_prefix_tokens, 1024);
  EXPECT_EQ(d.delay_ns, from_seconds(5.12));
  EXPECT_EQ(t1.prefix_block_hashes[0], t1_in.prefix_block_hashes[0]);
  EXPECT_EQ(t1.prefix_block_hashes[1], t1_in.prefix_block_hashes[1]);
  EXPECT_GE(t1.prefix_block_hashes[2], uint64_t{1} << 63);
  // The next turn continues from the rebuilt context: its prompt is the rebuilt prompt (1836)
  // plus turn 1's output and the new input, and the reasoning history restarted with turn 1's
  // 900 tokens: T = 900, WARNING, so the oldest of them are dropped (after the rebuilt prompt).
  Request t2 = gen.next_turn(100, 0, 100);
  AdmissionDecision d2;
  p.on_arrival(ctx, t2, d2);
  EXPECT_EQ(ctx.action("coupling_fuse"), 1);
  EXPECT_EQ(ctx.action("coupling_damp"), 1);
  const int64_t removed = 900 - std::llround(900 / (1 + std::sqrt(0.4)));
  EXPECT_EQ(t2.prompt_tokens, 1836 + 1000 + 100 - removed);
  EXPECT_EQ(t2.reused_prefix_tokens, 1836 + 1000 - removed);
  EXPECT_EQ(d2.delay_ns, 0);
  // The summary's full blocks keep the hashes turn 1 gave them.
  for (int b = 0; b < 3; ++b) EXPECT_EQ(t2.prefix_block_hashes[b], t1.prefix_block_hashes[b]);
  p.on_finish(ctx);
  EXPECT_NEAR(ctx.metrics.at("session_coupling.summary_delay_s"), 5.12, 1e-9);
  EXPECT_EQ(ctx.metrics.at("session_coupling.tokens_removed_fuse"), 4524 - 1836);
}

TEST(SessionCouplingTest, CriticalRejectsWithoutRebuild) {
  SessionCouplingParams params = think_only(DampingOrigin::kKappaSafe);
  params.rebuild = false;
  SessionCouplingPolicy p{params};
  FakePolicyContext ctx;
  SessionDriver gen;
  AdmissionDecision d0;
  Request t0 = gen.first(600, 1200, 100);  // T 1200: CRITICAL on the first turn
  p.on_arrival(ctx, t0, d0);
  EXPECT_TRUE(d0.reject);
  EXPECT_EQ(d0.reject_reason, "coupling_critical");
  EXPECT_EQ(ctx.action("coupling_reject"), 1);
}

TEST(SessionCouplingTest, RequestsOutsideSessionsPass) {
  SessionCouplingPolicy p{think_only(DampingOrigin::kKappaSafe)};
  FakePolicyContext ctx;
  Request r;
  r.prompt_tokens = 100;
  r.output_tokens = 5000;
  r.reasoning_tokens = 5000;
  r.prefix_block_hashes = {1};
  AdmissionDecision d;
  p.on_arrival(ctx, r, d);
  EXPECT_FALSE(d.reject);
  EXPECT_TRUE(ctx.actions.empty());
}

TEST(SessionCouplingTest, ParserReadsDefaultsAndRejectsAllZeroWeights) {
  Scenario sc = testing::tiny_scenario("\n[policies.session_coupling]\n");
  auto policies = make_policies(sc);
  ASSERT_EQ(policies.size(), 1u);
  Scenario bad = testing::tiny_scenario(
      "\n[policies.session_coupling]\ncontext_weight = 0\nturn_weight = 0\nthink_weight = 0\n");
  EXPECT_THROW(make_policies(bad), ConfigError);
  Scenario no_rebuild = testing::tiny_scenario(
      "\n[policies.session_coupling]\nrebuild = false\nsummary_tokens = 10\n");
  EXPECT_THROW(make_policies(no_rebuild), ConfigError);  // summary_tokens: unknown key then
}

// A whole run of the tiny agent workload with thresholds scaled to its small contexts: every
// action happens, requests are conserved, and prefix-cache hits stay within the (rewritten)
// prompts.
TEST(SessionCouplingTest, TinyAgentRunDampsFusesAndConserves) {
  Scenario with = parse_scenario_text(R"(name = "tiny_agent_coupling"
model = "../../../models/tiny.toml"
topology = "../../../topologies/h200-node.toml"
[deployment]
replicas = 2
gpus_per_replica = 4
[scheduler]
router = "session_affinity"
max_batch_tokens_per_gpu = 1024
workspace_gib = 1
[workload]
kind = "agent"
duration_s = 1.0
system_prompt_tokens = 1024
max_context_tokens = 3500
rollback_probability = 0.2
[workload.arrival]
rate_per_s = 10
[workload.turns]
distribution = "constant"
value = 4
[workload.first_input_tokens]
distribution = "constant"
value = 600
[workload.new_input_tokens]
distribution = "constant"
value = 200
[workload.reasoning_tokens]
distribution = "constant"
value = 60
[workload.answer_tokens]
distribution = "constant"
value = 40
[workload.tool_wait_s]
distribution = "constant"
value = 0.05
[run]
seed = 3
duration_s = 3
[policies.session_coupling]
train_context_tokens = 2500
reference_turns = 3
think_budget_tokens = 150
summary_tokens = 256
summary_tokens_per_s = 2000
)",
                                      "tiny_agent_coupling.toml", testing::kPolicyTestDir);
  RunOutput base = run_scenario(with, testing::keeping_requests(), -1, {});
  RunOutput out = run_scenario(with, testing::keeping_requests(), -1, make_policies(with));
  testing::expect_sane_run(out, "tiny agent with session coupling");
  const auto& a = out.counters.actions;
  EXPECT_GT(a.count("coupling_safe"), 0u);
  EXPECT_GT(a.count("coupling_damp"), 0u);
  EXPECT_GT(a.count("coupling_fuse"), 0u);
  EXPECT_GT(out.counters.policy_metrics.at("session_coupling.checks"), 0);
  // Same sessions, shorter prompts.
  double prompt_base = 0, prompt_with = 0;
  for (const RequestRecord& r : base.requests) prompt_base += r.prompt_tokens;
  for (const RequestRecord& r : out.requests) prompt_with += r.prompt_tokens;
  EXPECT_LT(prompt_with / out.requests.size(), prompt_base / base.requests.size());
}

// The shipped scenario, shortened: it loads, the policy checks every turn, and requests are
// conserved.
TEST(SessionCouplingTest, ShippedScenarioChecksEveryTurn) {
  RunOutput out = testing::run_shipped("scenarios/policies/session_coupling.toml", 8);
  testing::expect_sane_run(out, "session_coupling.toml");
  EXPECT_EQ(out.counters.policy_metrics.at("session_coupling.checks"),
            static_cast<double>(out.summary.num_arrived));
}

}  // namespace
}  // namespace moesim::sim
