#include "sim/study/search.h"

#include <gtest/gtest.h>

#include <atomic>

#include "sim/study/simulate.h"

namespace moesim::sim::study {
namespace {

const std::string kScenario = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/tiny.toml";

TEST(Search, FindsAKnownThresholdAboveAndBelowOne) {
  for (double threshold : {3.7, 0.3, 1.0, 100.0}) {
    int calls = 0;
    MultiplierSearch s = search_max_multiplier(
        [&](double m) {
          ++calls;
          return m <= threshold;
        },
        0.01, 10);
    EXPECT_TRUE(s.found) << threshold;
    EXPECT_LE(s.max_ok, threshold);
    EXPECT_GT(s.min_fail, threshold);
    EXPECT_LE(s.min_fail / s.max_ok, 1.01 + 1e-12);
    EXPECT_EQ(s.num_probes, calls);
  }
}

TEST(Search, NeverOrAlwaysMeeting) {
  MultiplierSearch never = search_max_multiplier([](double) { return false; }, 0.02, 4);
  EXPECT_FALSE(never.found);
  EXPECT_EQ(never.max_ok, 0);
  EXPECT_DOUBLE_EQ(never.min_fail, 1.0 / 16);
  EXPECT_EQ(never.num_probes, 5);
  MultiplierSearch always = search_max_multiplier([](double) { return true; }, 0.02, 4);
  EXPECT_TRUE(always.found);
  EXPECT_DOUBLE_EQ(always.max_ok, 16);
  EXPECT_EQ(always.min_fail, 0);
}

TEST(Search, ParsesSloLimits) {
  SearchSlo slo = parse_search_slo("ttft_p99_ms=2000,tpot_p50_ms=50,tpot_ms=80,attainment=0.9");
  ASSERT_EQ(slo.percentile_limits.size(), 2u);
  EXPECT_EQ(slo.percentile_limits[0].name, "ttft_p99_ms");
  EXPECT_EQ(slo.percentile_limits[1].limit_ms, 50);
  EXPECT_EQ(slo.request_tpot_ms, 80);
  EXPECT_FALSE(slo.request_ttft_ms.has_value());
  EXPECT_EQ(slo.min_attainment, 0.9);
  for (const char* bad : {"", "ttft_p98_ms=1", "ttft_p99_ms", "ttft_p99_ms=x", "ttft_p99_ms=-1",
                          "attainment=2", "ttft_p99_ms=1,", "ttft_p99_ms=1,ttft_p99_ms=2"}) {
    EXPECT_THROW(parse_search_slo(bad), ConfigError) << bad;
  }
  try {
    parse_search_slo("ttft_p98_ms=1");
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown limit (valid: ttft_ms"), std::string::npos);
  }
}

RequestRecord request(int32_t id, RequestOutcome outcome, double arrival_ms, double first_ms,
                      double done_ms, int64_t tokens) {
  RequestRecord r;
  r.request_id = id;
  r.outcome = outcome;
  r.arrival_ns = from_seconds(arrival_ms / 1e3);
  if (first_ms >= 0) r.first_token_ns = from_seconds(first_ms / 1e3);
  if (done_ms >= 0) r.done_ns = from_seconds(done_ms / 1e3);
  r.generated_tokens = tokens;
  return r;
}

TEST(Search, JudgesDecidedRequests) {
  Scenario sc;
  sc.slo.ttft_ms = 100;
  sc.slo.tpot_ms = 10;
  RunOutput out;
  out.end_ns = from_seconds(1.0);
  out.requests = {
      request(0, RequestOutcome::kCompleted, 0, 50, 140, 10),   // met (tpot 10 ms)
      request(1, RequestOutcome::kCompleted, 0, 150, 200, 10),  // ttft missed
      request(2, RequestOutcome::kRejected, 0, -1, -1, 0),      // missed
      request(3, RequestOutcome::kInFlight, 950, -1, -1, 0),    // undecided (50 ms waiting)
      request(4, RequestOutcome::kInFlight, 800, -1, -1, 0),    // missed (200 ms waiting)
      request(5, RequestOutcome::kInFlight, 850, 900, -1, 3)};  // undecided (has a token)
  out.summary = summarize(out.requests, {}, RunCounters{}, out.end_ns, 100, 10);
  SearchSlo slo;
  slo.min_attainment = 0.2;
  SloVerdict v = judge_run(out, sc, slo);
  EXPECT_DOUBLE_EQ(v.attainment, 0.25);  // 1 met of 4 decided
  EXPECT_TRUE(v.meets);
  slo.min_attainment = 0.3;
  v = judge_run(out, sc, slo);
  EXPECT_FALSE(v.meets);
  EXPECT_EQ(v.reason, "attainment 0.25 < 0.3");
  slo.request_ttft_ms = 160;  // request 1 now meets; request 4 (200 ms) still missed
  EXPECT_DOUBLE_EQ(judge_run(out, sc, slo).attainment, 0.5);
  // TTFTs 50, 50, 150 observed, 50 and 200 censored (requests 3 and 4 still waiting): by
  // Kaplan-Meier F = 0.4 at 50, 0.7 at 150, so p50 = 150 and p90 only ">= 200".
  slo.percentile_limits = {{"ttft_p50_ms", 160}, {"ttft_p90_ms", 120}};
  v = judge_run(out, sc, slo);
  EXPECT_FALSE(v.meets);
  EXPECT_EQ(v.reason, "ttft_p90_ms >= 200 > 120");
  slo.percentile_limits = {{"ttft_p50_ms", 140}};
  EXPECT_EQ(judge_run(out, sc, slo).reason, "ttft_p50_ms 150 > 140");
  slo.percentile_limits = {{"ttft_p90_ms", 250}};  // only bounded below by 200: unknown
  v = judge_run(out, sc, slo);
  EXPECT_FALSE(v.meets);
  EXPECT_TRUE(v.not_converged);
  EXPECT_EQ(v.reason.rfind("ttft_p90_ms unknown (>= 200", 0), 0u) << v.reason;
}

// A window that did not converge is unknown: it fails with the window's reason.
TEST(Search, AWindowThatDidNotConvergeIsUnknown) {
  Scenario sc;
  RunOutput out;
  out.end_ns = from_seconds(1.0);
  out.requests = {request(0, RequestOutcome::kCompleted, 0, 50, 140, 10)};
  out.summary = summarize(out.requests, {}, RunCounters{}, out.end_ns, 100, 10);
  SearchSlo slo;
  EXPECT_TRUE(judge_run(out, sc, slo).meets);
  MeasurementSummary& m = out.summary.measurement;
  m.analysed = true;
  m.converged = false;
  m.steady = false;
  m.reason = "no steady state: growing";
  SloVerdict v = judge_run(out, sc, slo);
  EXPECT_FALSE(v.meets);
  EXPECT_TRUE(v.not_converged);
  EXPECT_EQ(v.reason, "no steady state: growing");
  m.steady = true;
  m.reason = "too few measured requests";
  EXPECT_EQ(judge_run(out, sc, slo).reason, "not converged: too few measured requests");
  // A limit that fails anyway is named first.
  slo.percentile_limits = {{"ttft_p50_ms", 10}};
  v = judge_run(out, sc, slo);
  EXPECT_EQ(v.reason, "ttft_p50_ms 50 > 10");
  EXPECT_FALSE(v.not_converged);
}

TEST(Search, NoRateReasonNamesTheRateAskedForAndTheLowest) {
  ConfigSearch c;
  EXPECT_EQ(no_rate_reason(c), "meets the SLOs at no probed rate");
  RateProbe p;
  p.verdict.reason = "ttft_p99_ms 2301 > 2000";
  c.probes.push_back(p);
  EXPECT_EQ(no_rate_reason(c),
            "meets the SLOs at no probed rate (lowest probed: ttft_p99_ms 2301 > 2000)");
  p.verdict.reason = "no steady state: ...";
  c.probes.push_back(p);
  EXPECT_EQ(no_rate_reason(c),
            "meets the SLOs at no probed rate (at x base 1: ttft_p99_ms 2301 > 2000; lowest "
            "probed: no steady state: ...)");
}

// Three seeds with max rates 2.0, 2.2 and 1.8 req/s: mean 2, sd 0.2, t(0.975, 2) = 4.302653,
// half-width 0.496828; the brackets (up to 2.244) lie inside.
TEST(Search, RateIntervalOverSeeds) {
  ConfigSearch c;
  c.base_rate_per_s = 2;
  c.search = {true, 1.0, 1.02, 5};
  c.replicates = {{true, 1.1, 1.122, 5}, {true, 0.9, 0.918, 5}};
  const std::optional<RateInterval> iv = rate_interval(c);
  ASSERT_TRUE(iv.has_value());
  EXPECT_EQ(iv->num_seeds, 3);
  EXPECT_NEAR(iv->mean, 2.0, 1e-12);
  EXPECT_NEAR(iv->lo, 2.0 - 0.496828, 1e-6);
  EXPECT_NEAR(iv->hi, 2.0 + 0.496828, 1e-6);
  EXPECT_EQ(interval_text(iv->mean, iv->lo, iv->hi), "2.00 [1.50, 2.50]");
  // Equal seeds: the interval is the widest bracket, never of zero width.
  c.replicates = {{true, 1.0, 1.02, 5}, {true, 1.0, 1.02, 5}};
  EXPECT_NEAR(rate_interval(c)->hi, 2.04, 1e-12);
  EXPECT_EQ(interval_text(2.0, 2.0, 2.04), "2.000 [2.000, 2.040]");
  // A seed without a bracket, or a single seed: no interval.
  c.replicates = {{true, 1.0, 0, 5}};
  EXPECT_FALSE(rate_interval(c).has_value());
  c.replicates.clear();
  EXPECT_FALSE(rate_interval(c).has_value());
}

// The attainment is the run summary's (count_slo): the same numbers in both.
TEST(Search, AttainmentIsTheRunSummarys) {
  Scenario sc = load_scenario(kScenario);
  RunOutput out = simulate(sc, sc.run.seed);
  SloVerdict v = judge_run(out, sc, SearchSlo{});
  EXPECT_GT(v.num_decided, 0);
  EXPECT_EQ(v.num_met, out.summary.slo.num_met);
  EXPECT_EQ(v.num_decided, out.summary.slo.num_decided);
  EXPECT_DOUBLE_EQ(v.attainment, out.summary.slo.attainment);
}

// A limit over no data is not met: a percentile without samples, an attainment with nothing
// decided.
TEST(Search, LimitsWithoutDataAreNotMet) {
  Scenario sc;
  sc.slo.ttft_ms = 100;
  sc.slo.tpot_ms = 10;
  RunOutput out;
  out.end_ns = from_seconds(1.0);
  out.requests = {request(0, RequestOutcome::kInFlight, 950, -1, -1, 0),    // undecided
                  request(1, RequestOutcome::kInFlight, 900, 950, -1, 1)};  // undecided
  out.summary = summarize(out.requests, {}, RunCounters{}, out.end_ns, 100, 10);
  SearchSlo slo;
  slo.percentile_limits = {{"tpot_p99_ms", 50}};
  SloVerdict v = judge_run(out, sc, slo);
  EXPECT_FALSE(v.meets);
  EXPECT_EQ(v.reason, "tpot_p99_ms n/a (no samples)");
  // One TTFT of 50 ms observed, one censored at 50 ms: p99 is only bounded below, unknown.
  slo.percentile_limits = {{"ttft_p99_ms", 80}};
  v = judge_run(out, sc, slo);
  EXPECT_FALSE(v.meets);
  EXPECT_EQ(v.reason.rfind("ttft_p99_ms unknown (>= 50", 0), 0u) << v.reason;
  slo.percentile_limits.clear();
  v = judge_run(out, sc, slo);
  EXPECT_FALSE(v.meets);
  EXPECT_EQ(v.num_decided, 0);
  EXPECT_EQ(v.reason, "attainment n/a (no request decided)");
  slo.min_attainment = 0;
  EXPECT_TRUE(judge_run(out, sc, slo).meets);
}

TEST(Search, RateOverridesFollowTheWorkloadKind) {
  Scenario sc = load_scenario(kScenario);
  EXPECT_EQ(base_rate_per_s(sc), 40);
  EXPECT_STREQ(rate_unit(sc), "req/s");
  Override o = rate_override(sc, 2.5);
  EXPECT_EQ(o.key_path, "workload.arrival.rate_per_s");
  EXPECT_EQ(std::get<double>(o.value), 100);
}

TEST(Search, CheapestConfigPrefersFewerGpusThenHigherRate) {
  auto config = [](int64_t gpus, double max_rate, bool found = true, std::string error = "") {
    ConfigSearch c;
    c.num_gpus = gpus;
    c.max_rate_per_s = max_rate;
    c.search.found = found;
    c.error = std::move(error);
    return c;
  };
  std::vector<ConfigSearch> configs = {config(8, 50),
                                       config(4, 20),
                                       config(4, 30),
                                       config(2, 100, false),
                                       config(2, 100, true, "bad"),
                                       config(4, 30)};
  EXPECT_EQ(cheapest_config(configs, 25), std::optional<size_t>(2));
  EXPECT_EQ(cheapest_config(configs, 10), std::optional<size_t>(2));
  EXPECT_EQ(cheapest_config(configs, 40), std::optional<size_t>(0));
  EXPECT_EQ(cheapest_config(configs, 60), std::nullopt);
}

// On the tiny scenario, the search brackets the capacity: the
// reported rate meets the SLOs, the first failing rate above it does not, within the tolerance.
// Thread counts do not change the answer (OneConfigurationOnThreeThreadsIsTheOneThreadSearch).
TEST(Search, BracketsTheCapacityOfASmallScenario) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  // One sequence at a time per replica keeps the capacity within 2^6 x the scenario's rate.
  std::vector<std::vector<Override>> configs = {
      {{"scheduler.max_seqs", int64_t{1}}, {"deployment.replicas", int64_t{1}}},
      {{"scheduler.max_seqs", int64_t{1}}, {"deployment.replicas", int64_t{2}}},
      {{"deployment.replicas", int64_t{4}}, {"deployment.gpus_per_replica", int64_t{4}}}};
  SearchSlo slo = parse_search_slo("ttft_p99_ms=150,attainment=0.9");
  SearchOptions opt;
  opt.rel_tolerance = 0.05;
  opt.max_doublings = 6;
  opt.num_threads = 2;
  opt.target_rate_per_s = 0;
  SearchResult r = search_rates(t, configs, slo, opt);
  ASSERT_EQ(r.configs.size(), 3u);
  EXPECT_NE(r.configs[2].error.find("exceed the topology's 8 GPUs"), std::string::npos);
  for (size_t i = 0; i < 2; ++i) {
    const ConfigSearch& c = r.configs[i];
    ASSERT_TRUE(c.error.empty()) << c.error;
    ASSERT_TRUE(c.search.found);
    ASSERT_GT(c.search.min_fail, 0) << "no failing rate within 2^6 x";
    EXPECT_LE(c.search.min_fail / c.search.max_ok, 1.05 + 1e-12);
    EXPECT_EQ(c.num_gpus, 2 * static_cast<int64_t>(i + 1));
    EXPECT_DOUBLE_EQ(c.max_rate_per_s, 40 * c.search.max_ok);
    // Re-check the two ends of the bracket by running them.
    for (double m : {c.search.max_ok, c.search.min_fail}) {
      std::vector<Override> o = configs[i];
      Scenario base = t.instantiate(o);
      o.push_back(rate_override(base, m));
      Scenario sc = t.instantiate(o);
      EXPECT_EQ(judge_run(simulate(sc, sc.run.seed), sc, slo).meets, m == c.search.max_ok) << m;
    }
  }
  // Two replicas sustain more than one.
  EXPECT_GT(r.configs[1].max_rate_per_s, r.configs[0].max_rate_per_s);

  // The cheapest configuration for a target between the two capacities is the larger one; for a
  // target below both, the smaller; above both, none.
  double lo = r.configs[0].max_rate_per_s, hi = r.configs[1].max_rate_per_s;
  EXPECT_EQ(r.cheapest, std::optional<size_t>(0));  // target 0
  EXPECT_EQ(cheapest_config(r.configs, (lo + hi) / 2), std::optional<size_t>(1));
  EXPECT_EQ(cheapest_config(r.configs, lo * 0.5), std::optional<size_t>(0));
  EXPECT_EQ(cheapest_config(r.configs, hi * 2), std::nullopt);
}

void expect_same_search(const ConfigSearch& a, const ConfigSearch& b) {
  EXPECT_EQ(a.config_idx, b.config_idx);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.search.found, b.search.found);
  EXPECT_EQ(a.search.max_ok, b.search.max_ok);
  EXPECT_EQ(a.search.min_fail, b.search.min_fail);
  EXPECT_EQ(a.search.num_probes, b.search.num_probes);
  EXPECT_EQ(a.max_rate_per_s, b.max_rate_per_s);
  EXPECT_EQ(a.fail_rate_per_s, b.fail_rate_per_s);
  ASSERT_EQ(a.probes.size(), b.probes.size());
  for (size_t j = 0; j < a.probes.size(); ++j) {
    const RateProbe &p = a.probes[j], &q = b.probes[j];
    EXPECT_EQ(p.multiplier, q.multiplier) << j;
    EXPECT_EQ(p.rate_per_s, q.rate_per_s) << j;
    EXPECT_EQ(p.verdict.meets, q.verdict.meets) << j;
    EXPECT_EQ(p.verdict.num_met, q.verdict.num_met) << j;
    EXPECT_EQ(p.verdict.num_decided, q.verdict.num_decided) << j;
    EXPECT_EQ(p.verdict.attainment, q.verdict.attainment) << j;
    EXPECT_EQ(p.verdict.reason, q.verdict.reason) << j;
    EXPECT_EQ(p.input_tokens_per_s, q.input_tokens_per_s) << j;
    EXPECT_EQ(p.output_tokens_per_s, q.output_tokens_per_s) << j;
    EXPECT_EQ(p.ttft_p99_ms, q.ttft_p99_ms) << j;
    EXPECT_EQ(p.tpot_p99_ms, q.tpot_p99_ms) << j;
  }
}

// One configuration and three threads: its probes run speculatively on all three (search.h);
// the result, every probe and their order are those of one thread. Likewise when resuming leaves
// one configuration of two to search.
TEST(Search, OneConfigurationOnThreeThreadsIsTheOneThreadSearch) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  const std::vector<std::vector<Override>> one = {
      {{"scheduler.max_seqs", int64_t{1}}, {"deployment.replicas", int64_t{1}}}};
  SearchSlo slo = parse_search_slo("ttft_p99_ms=150,attainment=0.9");
  SearchOptions opt;
  opt.rel_tolerance = 0.05;
  opt.max_doublings = 6;
  opt.diagnose = false;
  opt.num_threads = 1;
  const SearchResult serial = search_rates(t, one, slo, opt);
  const ConfigSearch& c = serial.configs[0];
  ASSERT_TRUE(c.error.empty()) << c.error;
  // Brackets by doubling, then bisects: several probes in a row that speculation can overlap.
  ASSERT_TRUE(c.search.found);
  ASSERT_GT(c.search.min_fail, 0);
  EXPECT_GE(c.search.num_probes, 5);
  EXPECT_EQ(c.probes.size(), static_cast<size_t>(c.search.num_probes));
  EXPECT_EQ(c.probes[0].multiplier, 1.0);
  opt.num_threads = 3;
  const SearchResult parallel = search_rates(t, one, slo, opt);
  ASSERT_EQ(parallel.configs.size(), 1u);
  expect_same_search(parallel.configs[0], c);

  // Two configurations, the first already done (a resumed journal): the second alone gets both
  // threads and is delivered once, as with one thread.
  std::vector<std::vector<Override>> two = one;
  two.insert(two.begin(), {{"deployment.replicas", int64_t{2}}});
  opt.already_done = {true, false};
  for (int32_t threads : {1, 2}) {
    opt.num_threads = threads;
    std::vector<int64_t> delivered;
    opt.on_searched = [&](const ConfigSearch& s) { delivered.push_back(s.config_idx); };
    const SearchResult resumed = search_rates(t, two, slo, opt);
    EXPECT_EQ(delivered, std::vector<int64_t>{1}) << threads;
    EXPECT_TRUE(resumed.configs[0].probes.empty());
    ConfigSearch second = resumed.configs[1];
    second.config_idx = 0;
    expect_same_search(second, c);
  }
}

// Early verdicts (SearchOptions::full_probes = false, the default): a probe stops once its
// verdict fails whatever the rest of its run does. The decisions are those of full probes: the
// same probes in the same order, the same verdicts and bracket; a probe that meets ran to its
// end, so all its figures are the full run's.
// RunOptions::cancel: a run whose flag is already set stops at its first arrival or step end,
// says so, and a search judges it a failure it never keeps.
TEST(Search, CancelledRunStopsAtOnce) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  const Scenario sc = t.instantiate({});
  const RunOutput whole = simulate(sc, sc.run.seed);
  std::atomic<bool> cancel{true};
  RunOptions options;
  options.cancel = &cancel;
  const RunOutput cut = simulate(sc, sc.run.seed, options);
  EXPECT_FALSE(whole.cancelled);
  EXPECT_TRUE(cut.cancelled);
  EXPECT_LT(cut.end_ns, whole.end_ns);
  EXPECT_LT(cut.summary.num_completed, whole.summary.num_completed);
  const SloVerdict v = judge_run(cut, sc, parse_search_slo("ttft_p99_ms=1000000"));
  EXPECT_FALSE(v.meets);
  EXPECT_EQ(v.reason, "cancelled");
}

TEST(Search, EarlyVerdictsDecideAsFullProbes) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  const std::vector<std::vector<Override>> configs = {
      {{"scheduler.max_seqs", int64_t{1}}, {"deployment.replicas", int64_t{1}}},
      {{"scheduler.max_seqs", int64_t{1}}, {"deployment.replicas", int64_t{2}}}};
  SearchSlo slo = parse_search_slo("ttft_p99_ms=150,attainment=0.9");
  SearchOptions opt;
  opt.rel_tolerance = 0.05;
  opt.max_doublings = 6;
  opt.diagnose = false;
  double min_fail = 0;  // the first configuration's, not extended
  // Probes that may be extended too, with arrivals up to the first duration's end (not a finite
  // workload there, one from the first extension on): watched from the latest cut at 1.5 s.
  for (double factor : {2.0, 1.0}) {
    opt.max_duration_factor = factor;
    std::vector<std::vector<Override>> probed = configs;
    if (factor > 1) {
      for (auto& c : probed) c.push_back({"workload.duration_s", 1.5});
    }
    opt.full_probes = true;
    const SearchResult full = search_rates(t, probed, slo, opt);
    opt.full_probes = false;
    const SearchResult early = search_rates(t, probed, slo, opt);
    int stopped = 0;
    for (size_t i = 0; i < configs.size(); ++i) {
      const ConfigSearch &a = full.configs[i], &b = early.configs[i];
      ASSERT_TRUE(a.error.empty()) << a.error;
      ASSERT_TRUE(a.search.found);
      ASSERT_GT(a.search.min_fail, 0);
      EXPECT_EQ(a.search.max_ok, b.search.max_ok);
      EXPECT_EQ(a.search.min_fail, b.search.min_fail);
      EXPECT_EQ(a.max_rate_per_s, b.max_rate_per_s);
      ASSERT_EQ(a.probes.size(), b.probes.size());
      for (size_t j = 0; j < a.probes.size(); ++j) {
        const RateProbe &p = a.probes[j], &q = b.probes[j];
        EXPECT_EQ(p.multiplier, q.multiplier) << j;
        EXPECT_EQ(p.verdict.meets, q.verdict.meets) << j;
        if (q.verdict.reason.find("(decided early at ") != std::string::npos) {
          EXPECT_FALSE(q.verdict.meets);
          ++stopped;
          continue;
        }
        EXPECT_EQ(p.verdict.reason, q.verdict.reason) << j;
        EXPECT_EQ(p.verdict.num_decided, q.verdict.num_decided) << j;
        EXPECT_EQ(p.ttft_p99_ms, q.ttft_p99_ms) << j;
        EXPECT_EQ(p.output_tokens_per_s, q.output_tokens_per_s) << j;
      }
    }
    EXPECT_GT(stopped, 0) << "no probe was decided early at factor " << factor;
    min_fail = full.configs[0].search.min_fail;
  }

  // The lowest failing rate of the first configuration, run with the watch: it stops before its
  // duration, with fewer events, and its verdict is the full run's.
  std::vector<Override> o = configs[0];
  Scenario base = t.instantiate(o);
  o.push_back(rate_override(base, min_fail));
  Scenario sc = t.instantiate(o);
  RunOptions watched;
  watched.stop_on_certain_failure = watch_limits(sc, slo);
  const RunOutput cut = simulate(sc, sc.run.seed, watched);
  const RunOutput whole = simulate(sc, sc.run.seed);
  EXPECT_TRUE(whole.stopped_early.empty());
  EXPECT_FALSE(judge_run(whole, sc, slo).meets);
  ASSERT_FALSE(cut.stopped_early.empty());
  EXPECT_LT(cut.end_ns, from_seconds(sc.run.duration_s));
  EXPECT_LT(cut.num_events, whole.num_events);
  const SloVerdict v = judge_run(cut, sc, slo);
  EXPECT_FALSE(v.meets);
  EXPECT_EQ(v.reason, cut.stopped_early);
  EXPECT_TRUE(cut.conservation_ok) << cut.conservation_message;
}

// The planner's table of a search: each configuration's figures are those of its best probe (the
// highest rate that met the SLOs), its cost from them; feasible when it met at some rate.
TEST(Search, PlanUsesTheBestProbe) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  std::vector<std::vector<Override>> configs = {{{"deployment.replicas", int64_t{1}}},
                                                {{"deployment.replicas", int64_t{2}}}};
  SearchSlo slo = parse_search_slo("ttft_p99_ms=150,attainment=0.9");
  SearchOptions opt;
  opt.rel_tolerance = 0.1;
  opt.max_doublings = 8;
  opt.num_threads = 2;
  opt.gpu_price_per_hour = 4.0;
  SearchResult r = search_rates(t, configs, slo, opt);
  const Plan plan = search_plan(r, {"deployment.replicas"}, slo, std::nullopt);
  ASSERT_EQ(plan.entries.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ConfigSearch& c = r.configs[i];
    ASSERT_TRUE(c.search.found);
    EXPECT_TRUE(c.diagnosis.done);
    EXPECT_FALSE(c.diagnosis.infeasible());
    const RateProbe* best = best_probe(c);
    ASSERT_NE(best, nullptr);
    EXPECT_EQ(best->multiplier, c.search.max_ok);
    EXPECT_TRUE(best->verdict.meets);
    const PlanEntry& e = plan.entries[i];
    EXPECT_TRUE(e.feasible);
    EXPECT_EQ(e.parameter_values, std::vector<std::string>{std::to_string(i + 1)});
    EXPECT_EQ(*e.rate_per_s, c.max_rate_per_s);
    EXPECT_EQ(*e.output_tokens_per_s, *best->output_tokens_per_s);
    EXPECT_EQ(*e.ttft_p99_ms, *best->ttft_p99_ms);
    EXPECT_LE(*e.ttft_p99_ms, 150);
    EXPECT_EQ(e.price.source, "flag");
    EXPECT_DOUBLE_EQ(*e.cost.usd_per_m_output_tokens, 4.0 * static_cast<double>(c.num_gpus) * 1e6 /
                                                          (*best->output_tokens_per_s * 3600));
  }
  EXPECT_EQ(plan.cheapest_rule, "lowest cost per million output tokens at its max rate");
  ASSERT_TRUE(plan.cheapest.has_value());
  // With a target rate: the fewest GPUs sustaining it (cheapest_config).
  const double target = r.configs[0].max_rate_per_s * 1.5;
  const Plan targeted = search_plan(r, {"deployment.replicas"}, slo, target);
  EXPECT_EQ(targeted.cheapest, cheapest_config(r.configs, target));
  EXPECT_FALSE(targeted.entries[0].feasible);
  EXPECT_NE(targeted.entries[0].infeasible_reason.find("< the target"), std::string::npos);
}

// A configuration the diagnosis finds infeasible at any rate is not probed (it says why); with
// probe_infeasible it is, and still never counts as the cheapest.
TEST(Search, InfeasibleAtAnyRateIsNotProbed) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  // Every prompt needs more than 1 us of prefill on its own.
  SearchSlo slo = parse_search_slo("ttft_p99_ms=0.001");
  SearchOptions opt;
  opt.target_rate_per_s = 0;
  SearchResult r = search_rates(t, {{}}, slo, opt);
  const ConfigSearch& c = r.configs[0];
  EXPECT_TRUE(c.diagnosis.infeasible());
  EXPECT_TRUE(c.not_probed);
  EXPECT_EQ(c.search.num_probes, 0);
  EXPECT_TRUE(c.probes.empty());
  EXPECT_FALSE(c.search.found);
  EXPECT_EQ(c.diagnosis.verdict().rfind("infeasible at any rate: ttft_p99_ms<=0.001: 100.0% of "
                                        "admitted requests",
                                        0),
            0u)
      << c.diagnosis.verdict();
  EXPECT_FALSE(r.cheapest.has_value());
  const Plan plan = search_plan(r, {}, slo, std::nullopt);
  EXPECT_FALSE(plan.entries[0].feasible);
  EXPECT_EQ(plan.entries[0].infeasible_reason, c.diagnosis.verdict());

  opt.probe_infeasible = true;
  opt.max_doublings = 2;
  SearchResult probed = search_rates(t, {{}}, slo, opt);
  EXPECT_FALSE(probed.configs[0].not_probed);
  EXPECT_GT(probed.configs[0].search.num_probes, 0);
  EXPECT_FALSE(probed.configs[0].search.found);

  opt.diagnose = false;
  SearchResult plain = search_rates(t, {{}}, slo, opt);
  EXPECT_FALSE(plain.configs[0].diagnosis.done);
  EXPECT_GT(plain.configs[0].search.num_probes, 0);
}

// The motivating case of issue 18: DeepSeek-V3 P/D on the Mooncake trace at 2x with TTFT p99 at
// most 5 s. The trace's longest prompts need more than 5 s of prefill on one attention rank
// alone, so no rate meets the limit; the search says so at once, and states its rates against
// the trace's real rate.
TEST(Search, MooncakeTtftLimitIsInfeasibleAtAnyRate) {
  ScenarioTemplate t = ScenarioTemplate::load(std::string(MOESIM_SOURCE_DIR) +
                                              "/scenarios/deepseek-v3-h800-mooncake.toml");
  SearchSlo slo = parse_search_slo("ttft_p99_ms=5000,tpot_p99_ms=100");
  SearchResult r = search_rates(t, {{}}, slo, SearchOptions{});
  const ConfigSearch& c = r.configs[0];
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_TRUE(c.not_probed);
  EXPECT_EQ(c.trace_multiplier, 2.0);
  EXPECT_DOUBLE_EQ(c.trace_rate_per_s * 2.0, c.base_rate_per_s);
  ASSERT_FALSE(c.diagnosis.findings.empty());
  const LimitFinding& f = c.diagnosis.findings[0];
  EXPECT_EQ(f.limit, "ttft_p99_ms<=5000");
  EXPECT_TRUE(f.infeasible);
  EXPECT_GT(f.num_affected * 100, f.num_counted);  // more than the 1% the p99 allows
  EXPECT_NE(f.text.find("need more than 5 s of isolated prefill on one attention rank (1 GPU) of "
                        "a prefill replica of 32 GPUs"),
            std::string::npos)
      << f.text;
  EXPECT_GT(c.diagnosis.longest_prefill_ms, 5000);
}

}  // namespace
}  // namespace moesim::sim::study
