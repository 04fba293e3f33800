#include "sim/study/infeasibility.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "sim/study/overrides.h"
#include "sim/study/simulate.h"

namespace moesim::sim::study {
namespace {

const std::string kScenario = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/tiny.toml";

// The tiny scenario with requests far apart: every request runs alone on an idle replica.
Scenario sparse_tiny() {
  const std::vector<Override> o = {
      {"workload.arrival.rate_per_s", 2.0}, {"workload.duration_s", 6.0}, {"run.duration_s", 7.0}};
  return ScenarioTemplate::load(kScenario).instantiate(o);
}

RequestBound bound(double prefill_ms, double decode_ms, int64_t output_tokens = 10,
                   std::string rejected = "") {
  RequestBound b;
  b.prompt_tokens = 100;
  b.output_tokens = output_tokens;
  b.prefill_ms = prefill_ms;
  b.decode_ms = decode_ms;
  b.rejected = std::move(rejected);
  return b;
}

// Trace rows of 1e18 and INT64_MAX tokens are bounds rejected as too long, like a row merely over
// the context. Before, INT64_MAX + INT64_MAX overflowed, the row was priced as admitted and
// `moesim run --diagnose` chunked its prefill for ever.
TEST(Infeasibility, AbsurdTraceRowsAreTooLong) {
  const Scenario sc = load_scenario(std::string(MOESIM_SOURCE_DIR) +
                                    "/tests/data/scenarios/tiny_absurd_azure.toml");
  std::vector<std::string> rejected;
  for (const RequestBound& b : request_bounds(sc, 1)) rejected.push_back(b.rejected);
  EXPECT_EQ(rejected, (std::vector<std::string>{"", "context_too_long", "context_too_long",
                                                "context_too_long", ""}));
}

// A request alone on an idle replica gets its first token after its isolated prefill: the run's
// TTFTs equal the bounds up to the routing draw of each step (the run numbers its steps, the
// bounds price every step as step 0), and the TPOTs are at least the isolated decode step.
TEST(Infeasibility, BoundsMatchRequestsRunAlone) {
  const Scenario sc = sparse_tiny();
  std::string where;
  const std::vector<RequestBound> bounds = request_bounds(sc, sc.run.seed, &where);
  EXPECT_EQ(where, "one attention rank (1 GPU) of a replica of 2 GPUs (2 attention ranks)");
  const RunOutput out = simulate(sc, sc.run.seed, true);
  ASSERT_EQ(bounds.size(), out.requests.size());
  ASSERT_GE(bounds.size(), 8u);
  int64_t checked = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    const RequestRecord& r = out.requests[i];
    ASSERT_EQ(bounds[i].prompt_tokens, r.prompt_tokens) << i;
    EXPECT_EQ(bounds[i].cached_tokens, 0) << i;  // synthetic prompts share no prefix
    if (r.outcome != RequestOutcome::kCompleted) continue;
    const double ttft_ms = to_ms(r.ttft_ns());
    EXPECT_GT(bounds[i].prefill_ms, 0) << i;
    EXPECT_NEAR(bounds[i].prefill_ms, ttft_ms, 0.02 * ttft_ms) << i;
    if (r.generated_tokens >= 2) {
      EXPECT_LE(bounds[i].decode_ms, 1.02 * r.tpot_ns() / 1e6) << i;
    }
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

// Chunked prefill: a prompt above max_batch_tokens_per_gpu takes several steps, each at its own
// context, so its bound grows faster than its length.
TEST(Infeasibility, LongPromptsTakeSeveralChunks) {
  const std::vector<Override> o = {{"scheduler.max_batch_tokens_per_gpu", int64_t{256}}};
  const Scenario chunked = ScenarioTemplate::load(kScenario).instantiate(o);
  const Scenario whole = ScenarioTemplate::load(kScenario).instantiate({});
  const auto a = request_bounds(chunked, 11);
  const auto b = request_bounds(whole, 11);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].prompt_tokens > 256) {
      EXPECT_GT(a[i].prefill_ms, b[i].prefill_ms) << i;  // one step per 256 tokens, not one
    }
  }
}

// A percentile limit is infeasible when the requests above it reach the percentile's rank:
// floor(q (n - 1)) >= n - k.
TEST(Infeasibility, PercentileRuleAtTheRank) {
  SearchSlo slo;
  slo.percentile_limits = {{"ttft_p90_ms", 50}};
  slo.min_attainment = 0;
  // n = 10, q = 0.9: floor(8.1) = 8 >= 10 - k from k = 2.
  std::vector<RequestBound> bs(9, bound(10, 1));
  bs.push_back(bound(100, 1));
  Diagnosis one = diagnose(bs, slo, 1e9, 1e9, "rank");
  ASSERT_EQ(one.findings.size(), 1u);
  EXPECT_EQ(one.findings[0].limit, "ttft_p90_ms<=50");
  EXPECT_EQ(one.findings[0].num_affected, 1);
  EXPECT_FALSE(one.findings[0].infeasible);
  EXPECT_FALSE(one.infeasible());
  EXPECT_EQ(one.verdict(), "");
  bs[0] = bound(60, 1);
  Diagnosis two = diagnose(bs, slo, 1e9, 1e9, "rank");
  EXPECT_TRUE(two.infeasible());
  EXPECT_NE(two.verdict().find("infeasible at any rate: ttft_p90_ms<=50: 20.0% of admitted "
                               "requests (2 of 10) need more than 50 ms of isolated prefill on "
                               "rank"),
            std::string::npos)
      << two.verdict();
}

// TPOT percentiles count requests with two or more output tokens; e2e adds the decode steps;
// queueing has no bound; rejected requests are no samples.
TEST(Infeasibility, TpotE2eQueueingAndRejected) {
  SearchSlo slo;
  slo.percentile_limits = {
      {"tpot_p50_ms", 5}, {"e2e_p50_ms", 150}, {"queueing_p99_ms", 1e-6}, {"ttft_p50_ms", 1}};
  slo.min_attainment = 0;
  std::vector<RequestBound> bs = {bound(10, 8), bound(10, 8), bound(10, 8, 1), bound(10, 1),
                                  bound(0, 0, 10, "kv_capacity")};
  Diagnosis d = diagnose(bs, slo, 1e9, 1e9, "rank");
  std::map<std::string, LimitFinding> by;
  for (const auto& f : d.findings) by[f.limit] = f;
  ASSERT_EQ(by.count("tpot_p50_ms<=5"), 1u);
  EXPECT_EQ(by["tpot_p50_ms<=5"].num_counted, 3);  // one output token: no TPOT; rejected: none
  EXPECT_EQ(by["tpot_p50_ms<=5"].num_affected, 2);
  EXPECT_TRUE(by["tpot_p50_ms<=5"].infeasible);
  // e2e: 10 + 9 x 8 = 82 < 150 for all: no finding.
  EXPECT_EQ(by.count("e2e_p50_ms<=150"), 0u);
  EXPECT_EQ(by.count("queueing_p99_ms<=1e-06"), 0u);
  EXPECT_EQ(by["ttft_p50_ms<=1"].num_counted, 4);
  EXPECT_EQ(d.num_kv_capacity, 1);
}

// The attainment can never exceed the share of requests that can meet their per-request limits:
// rejected ones, and those whose isolated prefill or decode is beyond the limit, never do.
TEST(Infeasibility, AttainmentBound) {
  SearchSlo slo;
  slo.min_attainment = 0.75;
  std::vector<RequestBound> bs = {bound(10, 1), bound(10, 1), bound(10, 1), bound(300, 1),
                                  bound(10, 50)};
  Diagnosis d = diagnose(bs, slo, 200, 20, "rank");
  ASSERT_EQ(d.findings.size(), 1u);
  const LimitFinding& f = d.findings[0];
  EXPECT_EQ(f.limit, "attainment>=0.75 (ttft_ms<=200, tpot_ms<=20)");
  EXPECT_EQ(f.num_affected, 2);
  EXPECT_EQ(f.num_counted, 5);
  EXPECT_TRUE(f.infeasible);  // at most 3 / 5 = 60% < 75%
  EXPECT_NE(f.text.find("1 need more than 200 ms of isolated prefill, 1 need more than 20 ms per "
                        "decode step alone"),
            std::string::npos)
      << f.text;
  EXPECT_NE(f.text.find("attainment at most 60.0% at any rate"), std::string::npos) << f.text;
  slo.min_attainment = 0.6;
  EXPECT_FALSE(diagnose(bs, slo, 200, 20, "rank").infeasible());  // 60% is reachable
  EXPECT_TRUE(diagnose({}, slo, 200, 20, "rank").findings.empty());
}

// A sequence that cannot fit one rank's KV pool is rejected on arrival: with a KV pool too small
// for the longest requests, the diagnosis counts them and the attainment finding names them.
TEST(Infeasibility, SequencesBeyondTheKvPool) {
  // 9 KV blocks of 64 tokens per rank (1 % of the H200's HBM less 1.3052 GiB of workspace).
  const std::vector<Override> o = {{"scheduler.hbm_reserve_fraction", 0.99},
                                   {"scheduler.workspace_gib", 1.3052},
                                   {"workload.arrival.rate_per_s", 200.0}};
  const Scenario sc = ScenarioTemplate::load(kScenario).instantiate(o);
  const Diagnosis d = diagnose_scenario(sc, SearchSlo{}, 11);
  EXPECT_GT(d.num_kv_capacity, 0);
  EXPECT_LT(d.num_kv_capacity, d.num_requests);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_NE(d.findings.back().text.find("cannot fit one rank's KV pool (kv_capacity)"),
            std::string::npos)
      << d.findings.back().text;
  // The run rejects the same number.
  const RunOutput out = simulate(sc, 11);
  EXPECT_EQ(out.summary.counters.actions.at("reject:kv_capacity"), d.num_kv_capacity);
}

// Best case of the prefix cache: a request re-using the blocks of an earlier one prefills only
// the rest (a Mooncake trace carries such hashes).
TEST(Infeasibility, PrefixHitsOfEarlierRequests) {
  const Scenario sc = ScenarioTemplate::load(std::string(MOESIM_SOURCE_DIR) +
                                             "/scenarios/deepseek-v3-h800-mooncake.toml")
                          .instantiate({});
  const std::vector<RequestBound> bs = request_bounds(sc, 1);
  ASSERT_GT(bs.size(), 300u);
  EXPECT_EQ(bs[0].cached_tokens, 0);
  int64_t hits = 0;
  for (const RequestBound& b : bs) {
    EXPECT_LT(b.cached_tokens, b.prompt_tokens);
    EXPECT_EQ(b.cached_tokens % 512, 0);
    hits += b.cached_tokens > 0 ? 1 : 0;
  }
  EXPECT_GT(hits, 10);
}

}  // namespace
}  // namespace moesim::sim::study
