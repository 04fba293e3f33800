#include "sim/workload/workload_generator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "sim/core/horizon.h"
#include "sim/core/simulation.h"
#include "sim/workload/azure_trace.h"
#include "sim/workload/mooncake_trace.h"
#include "sim/workload/trace_window.h"

namespace moesim::sim {
namespace {

const std::string kTraces = MOESIM_SOURCE_DIR "/data/traces/";

WorkloadSpec synthetic_spec() {
  WorkloadSpec s;
  s.kind = WorkloadKind::kSynthetic;
  s.duration_s = 200.0;
  s.synthetic.arrival = ArrivalSpec{ArrivalSpec::Process::kPoisson, 100.0, 1.0};
  ValueDistributionSpec prompt;
  prompt.shape = ValueDistributionSpec::Shape::kLognormal;
  prompt.sigma = 1.0;
  prompt.mu = std::log(2000.0) - 0.5;  // mean 2000
  prompt.min = 1;
  prompt.max = kValueDistributionNoMax;
  s.synthetic.prompt_tokens = prompt;
  ValueDistributionSpec output;
  output.shape = ValueDistributionSpec::Shape::kEmpirical;
  output.values = {10, 100, 1000};
  output.weights = {5, 3, 2};
  s.synthetic.output_tokens = output;
  s.synthetic.reasoning_tokens = constant_distribution(7, true);
  s.domain_mix = {1.0, 0.0, 3.0, 0.0};
  return s;
}

TEST(WorkloadGenerator, SyntheticRateLengthsAndDomains) {
  RngStream rng(7, "workload");
  WorkloadGenerator gen(synthetic_spec(), rng);
  const std::vector<Request> reqs = gen.generate_all();
  // 100/s for 200 s: Poisson count 20000 +- 141.
  EXPECT_NEAR(static_cast<double>(reqs.size()), 20000.0, 5 * std::sqrt(20000.0));
  double prompt_sum = 0.0;
  double answer_sum = 0.0;
  int num_code = 0;
  SimTime last = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Request& r = reqs[i];
    ASSERT_EQ(r.id.value, static_cast<int32_t>(i));
    ASSERT_GE(r.arrival_ns, last);
    ASSERT_LT(r.arrival_ns, 200 * kNsPerS);
    last = r.arrival_ns;
    ASSERT_GE(r.prompt_tokens, 1);
    ASSERT_EQ(r.reasoning_tokens, 7);
    ASSERT_EQ(static_cast<int64_t>(r.prefix_block_hashes.size()),
              num_prefix_blocks(r.prompt_tokens));
    ASSERT_FALSE(r.session.valid());
    prompt_sum += static_cast<double>(r.prompt_tokens);
    answer_sum += static_cast<double>(r.output_tokens - r.reasoning_tokens);
    num_code += r.domain == Domain::kCode ? 1 : 0;
    ASSERT_TRUE(r.domain == Domain::kCode || r.domain == Domain::kChat);
  }
  const double n = static_cast<double>(reqs.size());
  // Lognormal mean 2000, sd 2000 * sqrt(e - 1) ~ 2622: standard error ~ 19.
  EXPECT_NEAR(prompt_sum / n, 2000.0, 5 * 2622 / std::sqrt(n));
  // Empirical answer mean 0.5 * 10 + 0.3 * 100 + 0.2 * 1000 = 235, sd ~ 373.
  EXPECT_NEAR(answer_sum / n, 235.0, 5 * 373 / std::sqrt(n));
  EXPECT_NEAR(num_code / n, 0.25, 5 * std::sqrt(0.25 * 0.75 / n));
  // Fresh requests share no prefix blocks.
  EXPECT_EQ(reqs[1].prefix_block_hashes.front(), reqs[0].prefix_block_hashes.back() + 1);
  EXPECT_FALSE(gen.next().has_value());
  EXPECT_EQ(gen.stats().num_requests, static_cast<int64_t>(reqs.size()));
}

TEST(WorkloadGenerator, SyntheticGammaArrivalsAreBurstier) {
  WorkloadSpec spec = synthetic_spec();
  spec.duration_s.reset();
  spec.num_requests = 50000;
  spec.synthetic.arrival = ArrivalSpec{ArrivalSpec::Process::kGamma, 100.0, 4.0};
  RngStream rng(7, "workload");
  WorkloadGenerator gen(spec, rng);
  const std::vector<Request> reqs = gen.generate_all();
  ASSERT_EQ(reqs.size(), 50000u);
  // Mean rate 100/s: the last of 50000 arrivals near 500 s (sd of the sum 4 * sqrt(n) / 100).
  EXPECT_NEAR(to_seconds(reqs.back().arrival_ns), 500.0, 5 * 4.0 * std::sqrt(50000.0) / 100.0);
  double sum = 0.0;
  double sum2 = 0.0;
  for (size_t i = 1; i < reqs.size(); ++i) {
    const double gap = to_seconds(reqs[i].arrival_ns - reqs[i - 1].arrival_ns);
    sum += gap;
    sum2 += gap * gap;
  }
  const double mean = sum / (reqs.size() - 1);
  EXPECT_NEAR(std::sqrt(sum2 / (reqs.size() - 1) - mean * mean) / mean, 4.0, 0.3);
}

TEST(WorkloadGenerator, SameSeedSameRequestsOtherStreamOtherRequests) {
  auto run = [](uint64_t seed, const char* stream) {
    Simulation sim(seed);
    WorkloadGenerator gen(synthetic_spec(), sim.rng(stream));
    std::vector<std::tuple<SimTime, int64_t, int64_t, Domain>> out;
    for (int i = 0; i < 100; ++i) {
      const Request r = *gen.next();
      out.emplace_back(r.arrival_ns, r.prompt_tokens, r.output_tokens, r.domain);
    }
    return out;
  };
  EXPECT_EQ(run(1, "workload"), run(1, "workload"));
  EXPECT_NE(run(1, "workload"), run(1, "workload2"));
  EXPECT_NE(run(1, "workload"), run(2, "workload"));
}

WorkloadSpec agent_spec() {
  WorkloadSpec s;
  s.kind = WorkloadKind::kAgent;
  s.num_sessions = 300;
  AgentWorkloadSpec& a = s.agent;
  a.arrival = ArrivalSpec{ArrivalSpec::Process::kPoisson, 2.0, 1.0};
  a.turns = constant_distribution(6, true);
  a.system_prompt_tokens = 1100;  // two full shared blocks
  a.first_input_tokens = constant_distribution(900, true);
  a.new_input_tokens = constant_distribution(300, true);
  a.reasoning_tokens = constant_distribution(200, true);
  a.answer_tokens = constant_distribution(100, true);
  a.tool_wait_s = constant_distribution(1.5, false);
  return s;
}

// A minimal serving layer: each request completes `service(request)` after it arrives; completed
// session turns ask the generator for the next one.
struct AgentHarness {
  std::vector<Request> issued;
  std::map<int32_t, std::vector<Request>> by_session;
  std::map<int64_t, SimTime> completion_ns;  // by request id

  void run(WorkloadGenerator& gen, const std::function<SimTime(const Request&)>& service) {
    Simulation sim(1);
    std::map<int64_t, Request> pending;
    EventKind arrive = 0;
    EventKind complete = 0;
    auto submit = [&](Request r, Scheduler& s) {
      const int64_t id = r.id.value;
      s.schedule_at(r.arrival_ns, arrive, id);
      pending.emplace(id, std::move(r));
    };
    arrive = sim.register_kind("arrive", [&](const Event& ev, Scheduler& s) {
      const Request& r = pending.at(ev.id0);
      s.schedule_after(service(r), complete, ev.id0);
    });
    complete = sim.register_kind("complete", [&](const Event& ev, Scheduler& s) {
      Request r = pending.at(ev.id0);
      pending.erase(ev.id0);
      completion_ns[r.id.value] = s.now();
      issued.push_back(r);
      by_session[r.session.value].push_back(r);
      if (std::optional<Request> next = gen.on_turn_completed(r.session, s.now())) {
        EXPECT_EQ(next->arrival_ns, s.now() + 1'500'000'000);
        submit(std::move(*next), s);
      }
    });
    while (std::optional<Request> r = gen.next()) submit(std::move(*r), sim);
    sim.run();
  }
};

TEST(WorkloadGenerator, AgentContextGrowsAndIsReusedAsPrefix) {
  RngStream rng(5, "workload");
  WorkloadGenerator gen(agent_spec(), rng);
  AgentHarness h;
  h.run(gen, [](const Request& r) { return r.output_tokens * 10 * kNsPerMs; });
  ASSERT_EQ(h.by_session.size(), 300u);
  EXPECT_EQ(gen.stats().num_sessions, 300);
  EXPECT_EQ(gen.stats().num_sessions_completed, 300);
  EXPECT_EQ(gen.stats().num_requests, 300 * 6);
  EXPECT_EQ(gen.stats().num_rollbacks, 0);
  EXPECT_EQ(gen.num_active_sessions(), 0u);
  const std::vector<uint64_t>& first_hashes = h.by_session.at(0)[0].prefix_block_hashes;
  for (const auto& [session, turns] : h.by_session) {
    ASSERT_EQ(turns.size(), 6u);
    for (size_t t = 0; t < turns.size(); ++t) {
      const Request& r = turns[t];
      ASSERT_EQ(r.turn_idx, static_cast<int32_t>(t));
      ASSERT_EQ(r.attempt_idx, 0);
      ASSERT_EQ(r.output_tokens, 300);
      ASSERT_EQ(r.reasoning_tokens, 200);
      // 2000 tokens at turn 0, then + 300 output + 300 new input per turn.
      ASSERT_EQ(r.prompt_tokens, 2000 + 600 * static_cast<int64_t>(t));
      ASSERT_EQ(static_cast<int64_t>(r.prefix_block_hashes.size()),
                num_prefix_blocks(r.prompt_tokens));
      // The shared system prompt's two full blocks carry the same hashes in every session.
      ASSERT_EQ(r.prefix_block_hashes[0], first_hashes[0]);
      ASSERT_EQ(r.prefix_block_hashes[1], first_hashes[1]);
      if (t == 0) {
        ASSERT_EQ(r.reused_prefix_tokens, 0);
        if (session != 0) {
          ASSERT_NE(r.prefix_block_hashes[2], first_hashes[2]);
        }
        continue;
      }
      const Request& prev = turns[t - 1];
      ASSERT_EQ(r.reused_prefix_tokens, prev.prompt_tokens + prev.output_tokens);
      const size_t full_blocks = static_cast<size_t>(prev.prompt_tokens / kPrefixBlockTokens);
      for (size_t b = 0; b < r.prefix_block_hashes.size(); ++b) {
        if (b < full_blocks) {
          ASSERT_EQ(r.prefix_block_hashes[b], prev.prefix_block_hashes[b]);
        } else if (b < prev.prefix_block_hashes.size()) {
          ASSERT_NE(r.prefix_block_hashes[b], prev.prefix_block_hashes[b]);
        }
      }
      // The next turn arrives one tool wait after the previous one completed.
      ASSERT_EQ(r.arrival_ns, h.completion_ns.at(prev.id.value) + 1'500'000'000);
    }
  }
}

TEST(WorkloadGenerator, AgentRollbacksReissueTheSameTurn) {
  WorkloadSpec spec = agent_spec();
  spec.num_sessions = 1000;
  spec.agent.turns = constant_distribution(4, true);
  spec.agent.rollback_probability = 0.25;
  spec.agent.max_rollbacks_per_turn = 1000;
  RngStream rng(5, "workload");
  WorkloadGenerator gen(spec, rng);
  AgentHarness h;
  h.run(gen, [](const Request& r) { return 50 * kNsPerMs; });
  const WorkloadStats& st = gen.stats();
  // 4000 turns with geometric re-issues: mean p / (1 - p) = 1/3 each, variance p / (1 - p)^2.
  const double expected = 4000.0 / 3.0;
  EXPECT_NEAR(static_cast<double>(st.num_rollbacks), expected,
              5 * std::sqrt(4000.0 * 0.25 / 0.5625));
  EXPECT_EQ(st.num_requests, 4000 + st.num_rollbacks);
  EXPECT_EQ(st.num_sessions_completed, 1000);
  int64_t reissues = 0;
  for (const auto& [session, reqs] : h.by_session) {
    for (size_t i = 1; i < reqs.size(); ++i) {
      const Request& r = reqs[i];
      const Request& prev = reqs[i - 1];
      if (r.attempt_idx == 0) {
        ASSERT_EQ(r.turn_idx, prev.turn_idx + 1);
        continue;
      }
      ++reissues;
      // Rolled back to the snapshot: the same turn, prompt and blocks; all of it seen before.
      ASSERT_EQ(r.turn_idx, prev.turn_idx);
      ASSERT_EQ(r.attempt_idx, prev.attempt_idx + 1);
      ASSERT_EQ(r.prompt_tokens, prev.prompt_tokens);
      ASSERT_EQ(r.prefix_block_hashes, prev.prefix_block_hashes);
      ASSERT_EQ(r.reused_prefix_tokens, r.prompt_tokens);
    }
    ASSERT_EQ(reqs.back().turn_idx, 3);
  }
  EXPECT_EQ(reissues, st.num_rollbacks);
}

TEST(WorkloadGenerator, AgentRollbackLimitEndsSessions) {
  WorkloadSpec spec = agent_spec();
  spec.num_sessions = 2000;
  spec.agent.turns = constant_distribution(3, true);
  spec.agent.rollback_probability = 0.5;
  spec.agent.max_rollbacks_per_turn = 0;
  RngStream rng(5, "workload");
  WorkloadGenerator gen(spec, rng);
  AgentHarness h;
  h.run(gen, [](const Request& r) { return kNsPerMs; });
  const WorkloadStats& st = gen.stats();
  EXPECT_EQ(st.num_rollbacks, 0);
  EXPECT_EQ(st.num_sessions_completed + st.num_sessions_rollback_limit, 2000);
  // A session completes when all 3 turns succeed: 1/8.
  EXPECT_NEAR(st.num_sessions_completed / 2000.0, 0.125, 5 * std::sqrt(0.125 * 0.875 / 2000));
}

// The serving layer's timing changes when turns arrive, never what the sessions contain.
TEST(WorkloadGenerator, AgentSessionsDoNotDependOnServiceTimes) {
  WorkloadSpec spec = agent_spec();
  spec.num_sessions = 200;
  spec.agent.turns.shape = ValueDistributionSpec::Shape::kEmpirical;
  spec.agent.turns.values = {1, 3, 9};
  spec.agent.turns.weights = {1, 1, 1};
  spec.agent.rollback_probability = 0.2;
  auto contents = [&](SimTime service_ns) {
    RngStream rng(9, "workload");
    WorkloadGenerator gen(spec, rng);
    AgentHarness h;
    h.run(gen, [&](const Request&) { return service_ns; });
    std::map<int32_t, std::vector<std::tuple<int32_t, int32_t, int64_t, int64_t>>> out;
    for (const auto& [session, reqs] : h.by_session) {
      for (const Request& r : reqs) {
        out[session].emplace_back(r.turn_idx, r.attempt_idx, r.prompt_tokens, r.output_tokens);
      }
    }
    return out;
  };
  EXPECT_EQ(contents(kNsPerMs), contents(100 * kNsPerS));
}

TEST(WorkloadGenerator, AbandonedSessionsEnd) {
  RngStream rng(5, "workload");
  WorkloadGenerator gen(agent_spec(), rng);
  const Request first = *gen.next();
  EXPECT_EQ(gen.num_active_sessions(), 1u);
  gen.abandon_session(first.session);
  EXPECT_EQ(gen.num_active_sessions(), 0u);
  EXPECT_EQ(gen.stats().num_sessions_abandoned, 1);
}

TEST(WorkloadGeneratorDeathTest, CompletingAnUnknownSessionAborts) {
  EXPECT_DEATH(
      {
        RngStream rng(5, "workload");
        WorkloadGenerator gen(agent_spec(), rng);
        gen.on_turn_completed(SessionId(42), 0);
      },
      "not active");
}

WorkloadSpec trace_spec(WorkloadKind kind, const std::string& file,
                        std::vector<TraceRecord> records) {
  WorkloadSpec s;
  s.kind = kind;
  s.trace.path = kTraces + file;
  s.trace.records = std::make_shared<const std::vector<TraceRecord>>(std::move(records));
  return s;
}

TEST(WorkloadGenerator, MooncakeReplayWithWindowAndRateMultiplier) {
  WorkloadSpec spec = trace_spec(WorkloadKind::kMooncake, "conversation_trace.jsonl",
                                 read_mooncake_trace(kTraces + "conversation_trace.jsonl"));
  {
    RngStream rng(1, "workload");
    WorkloadGenerator all(spec, rng);
    const std::vector<Request> reqs = all.generate_all();
    ASSERT_EQ(reqs.size(), 12031u);
    EXPECT_EQ(reqs.back().arrival_ns, int64_t{3536999} * kNsPerMs);
    EXPECT_EQ(reqs.front().prefix_block_hashes.size(), 14u);
  }
  spec.trace.start_s = 600;
  spec.trace.end_s = 1200;
  spec.trace.rate_multiplier = 2.0;
  RngStream rng(1, "workload");
  WorkloadGenerator gen(spec, rng);
  const std::vector<Request> reqs = gen.generate_all();
  ASSERT_EQ(reqs.size(), 1908u);
  EXPECT_EQ(reqs.front().arrival_ns, 0);  // the row at 600000 ms
  EXPECT_EQ(reqs.front().prompt_tokens, 904);
  EXPECT_EQ(reqs.back().arrival_ns, 299'999'500'000);  // (1199999 - 600000) ms / 2
  for (const Request& r : reqs) {
    ASSERT_EQ(static_cast<int64_t>(r.prefix_block_hashes.size()),
              num_prefix_blocks(r.prompt_tokens));
  }

  spec.trace.max_requests = 10;
  RngStream rng2(1, "workload");
  WorkloadGenerator capped(spec, rng2);
  EXPECT_EQ(capped.generate_all().size(), 10u);
}

// A trace slowed down 1e6 times (rate_multiplier's floor): a row 292 years in overflowed
// int64 nanoseconds (issue 19). Rows past the horizon end the trace: no run reaches them.
TEST(WorkloadGenerator, TraceRowsPastTheHorizonEndTheTrace) {
  std::vector<TraceRecord> rows(3);
  rows[0].timestamp_ns = 0;
  rows[1].timestamp_ns = 3'000'000'000'000'000;  // 34.7 days, x 1e6 = 34,700 years
  rows[2].timestamp_ns = kSimTimeMax;
  for (TraceRecord& r : rows) r.input_tokens = r.output_tokens = 10;
  WorkloadSpec spec = trace_spec(WorkloadKind::kAzure, "unused.csv", rows);
  RngStream rng(1, "workload");
  {
    WorkloadGenerator gen(spec, rng);
    EXPECT_EQ(gen.generate_all().size(), 2u);  // at speed only the row at 292 years is past it
  }
  // The lap (292 years plus a mean gap) does not fit in int64 ns: it reads as "never repeats".
  EXPECT_EQ(select_trace_window(rows, 0.0, std::nullopt, std::nullopt).period_ns, kSimTimeMax);
  spec.trace.rate_multiplier = 1e-6;
  WorkloadGenerator gen(spec, rng);
  const std::vector<Request> reqs = gen.generate_all();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].arrival_ns, 0);
}

// Three rows, id 0 in all of them (shared), ids 1-3 private; the lap is 3000 + 1500 ms.
TEST(WorkloadGenerator, TraceLoopRepeatsTheWindowWithFreshPrivateIds) {
  std::vector<TraceRecord> rows(3);
  rows[0] = {0, 1024, 10, {0, 1}, 1};
  rows[1] = {1000 * kNsPerMs, 1536, 20, {0, 1, 2}, 2};
  rows[2] = {3000 * kNsPerMs, 512, 30, {0, 3}, 3};
  WorkloadSpec spec = trace_spec(WorkloadKind::kMooncake, "unused.jsonl", rows);
  spec.trace.replay = TraceReplay::kLoop;
  spec.trace.rate_multiplier = 2.0;
  spec.duration_s = 4.5;  // lap 2 would start at 4500 ms: excluded
  RngStream rng(1, "workload");
  WorkloadGenerator gen(spec, rng);
  const std::vector<Request> reqs = gen.generate_all();
  ASSERT_EQ(reqs.size(), 6u);
  const std::vector<SimTime> arrivals_ms = {0, 500, 1500, 2250, 2750, 3750};
  const std::vector<std::vector<uint64_t>> hashes = {{0, 1}, {0, 1, 2}, {0, 3},
                                                     {0, 5}, {0, 5, 6}, {0, 7}};
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].id, RequestId(static_cast<int32_t>(i)));
    EXPECT_EQ(reqs[i].arrival_ns, arrivals_ms[i] * kNsPerMs) << i;
    EXPECT_EQ(reqs[i].prefix_block_hashes, hashes[i]) << i;
    EXPECT_EQ(reqs[i].prompt_tokens, rows[i % 3].input_tokens);
  }
  // rate_per_s instead: the window's 3 rows per 4.5 s lap, at 4 / 3 req/s, is 2x as well.
  spec.trace.rate_per_s = 4.0 / 3.0;
  spec.trace.rate_multiplier = 1.0;
  RngStream rng2(1, "workload");
  WorkloadGenerator by_rate(spec, rng2);
  const std::vector<Request> same = by_rate.generate_all();
  ASSERT_EQ(same.size(), 6u);
  EXPECT_EQ(same[5].arrival_ns, reqs[5].arrival_ns);
}

TEST(WorkloadGenerator, TraceModelIsDeterministicAndEndsAtTheDuration) {
  WorkloadSpec spec = trace_spec(WorkloadKind::kAzure, "AzureLLMInferenceTrace_code.csv",
                                 read_azure_trace(kTraces + "AzureLLMInferenceTrace_code.csv"));
  spec.trace.replay = TraceReplay::kModel;
  const TraceWindow w = select_trace_window(*spec.trace.records, 0, 600.0, std::nullopt);
  spec.trace.end_s = 600.0;
  spec.trace.model = std::make_shared<const TraceModel>(fit_trace_model(*spec.trace.records, w));
  spec.trace.rate_per_s = 50.0;
  spec.duration_s = 20.0;
  auto run = [&spec](uint64_t seed) {
    RngStream rng(seed, "workload");
    WorkloadGenerator gen(spec, rng);
    return gen.generate_all();
  };
  const std::vector<Request> a = run(1);
  const std::vector<Request> b = run(1);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].arrival_ns, b[i].arrival_ns);
    ASSERT_EQ(a[i].prompt_tokens, b[i].prompt_tokens);
  }
  EXPECT_NE(run(2).front().arrival_ns, a.front().arrival_ns);
  EXPECT_LT(a.back().arrival_ns, 20 * kNsPerS);
  // Twice the rate on the same seed: the same requests at half the times (each gap is rounded
  // to the nanosecond on its own), twice as many in the same duration.
  spec.trace.rate_per_s = 100.0;
  const std::vector<Request> fast = run(1);
  ASSERT_GE(fast.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(static_cast<double>(fast[i].arrival_ns), a[i].arrival_ns / 2.0, i + 1.0) << i;
    ASSERT_EQ(fast[i].prompt_tokens, a[i].prompt_tokens);
  }
  // Azure rows carry no prefix information: fresh blocks, as in a window replay.
  EXPECT_EQ(a[1].prefix_block_hashes.front(), a[0].prefix_block_hashes.back() + 1);
}

// Rows of 1e18 and INT64_MAX tokens (an Azure CSV holds any int64): over the model's context
// (max_request_tokens), they get no prefix blocks, so they cost what a row merely over it does;
// the run rejects them on arrival (tests/sim/serving/cluster_test.cc). Before, the generator
// made one hash per 512 tokens of the row: 16.8 GB and 45 s before running out of memory.
TEST(WorkloadGenerator, RowsOverTheContextGetNoPrefixBlocks) {
  std::istringstream csv(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 18:15:46.0,1000,10\n"
      "2023-11-16 18:15:46.1,1000000000000000000,5\n"
      "2023-11-16 18:15:46.2,9223372036854775807,9223372036854775807\n"
      "2023-11-16 18:15:46.3,5000,10\n"
      "2023-11-16 18:15:46.4,1000,10\n");
  WorkloadSpec spec = trace_spec(WorkloadKind::kAzure, "absurd.csv", read_azure_trace(csv, "t"));
  spec.max_request_tokens = 4096;
  RngStream rng(1, "workload");
  WorkloadGenerator gen(spec, rng);
  const std::vector<Request> reqs = gen.generate_all();
  ASSERT_EQ(reqs.size(), 5u);
  EXPECT_EQ(reqs[0].prefix_block_hashes, (std::vector<uint64_t>{0, 1}));
  for (int i = 1; i <= 3; ++i) EXPECT_TRUE(reqs[i].prefix_block_hashes.empty()) << i;
  EXPECT_EQ(reqs[1].prompt_tokens, 1'000'000'000'000'000'000);
  EXPECT_EQ(reqs[2].output_tokens, INT64_MAX);
  // The hash counter moves as if their blocks were made (2 + 1953125000000000 + 2^54 + 10):
  // later requests' hashes do not depend on the limit.
  const uint64_t next = 2 + 1'953'125'000'000'000 + (uint64_t{1} << 54) + 10;
  EXPECT_EQ(reqs[4].prefix_block_hashes, (std::vector<uint64_t>{next, next + 1}));
}

TEST(WorkloadGenerator, AzureReplayWithWindow) {
  WorkloadSpec spec = trace_spec(WorkloadKind::kAzure, "AzureLLMInferenceTrace_conv.csv",
                                 read_azure_trace(kTraces + "AzureLLMInferenceTrace_conv.csv"));
  spec.trace.start_s = 600;
  spec.trace.end_s = 1200;
  spec.trace.rate_multiplier = 0.5;  // half speed: gaps double
  spec.domain_mix = {0.0, 0.0, 0.0, 1.0};
  RngStream rng(1, "workload");
  WorkloadGenerator gen(spec, rng);
  const std::vector<Request> reqs = gen.generate_all();
  ASSERT_EQ(reqs.size(), 3118u);
  EXPECT_EQ(reqs.front().arrival_ns, 2 * 197'636'000);  // row at 600.197636 s
  EXPECT_EQ(reqs.front().prompt_tokens, 958);
  EXPECT_EQ(reqs.front().output_tokens, 89);
  EXPECT_EQ(reqs.back().arrival_ns, 2 * 599'748'791'000);
  EXPECT_EQ(reqs.back().prompt_tokens, 2345);
  EXPECT_EQ(reqs.back().domain, Domain::kMultilingual);
  // Azure rows carry no prefix information: every block is fresh.
  EXPECT_EQ(reqs[1].prefix_block_hashes.front(), reqs[0].prefix_block_hashes.back() + 1);
}

}  // namespace
}  // namespace moesim::sim
