#include "sim/study/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "base/check.h"
#include "sim/metrics/request_stats.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/simulate.h"

namespace moesim::sim::study {
namespace {

// The summary figures compared, in output order.
const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> kNames = {
      "ttft_p50_ms",         "ttft_p99_ms",    "tpot_p50_ms",       "tpot_p99_ms",
      "output_tokens_per_s", "requests_per_s", "goodput_req_per_s", "slo_attainment"};
  return kNames;
}

// The unit of a figure or action row, from its name.
std::string unit_of(const std::string& metric) {
  if (metric.rfind("action:", 0) == 0) return "count";
  if (metric == "tokens_per_verification") return "tokens";
  if (metric == "kv_load_ms_mean") return "ms";
  if (metric.ends_with("_ms")) return "ms";
  if (metric == "output_tokens_per_s") return "tokens/s";
  if (metric.ends_with("_per_s")) return "requests/s";
  return "fraction";
}

constexpr double kNoData = std::numeric_limits<double>::quiet_NaN();
double or_no_data(double v, bool has) { return has ? v : kNoData; }

// B - A over |A|; NaN without data or when A is 0.
double relative(double a, double diff) {
  return std::isfinite(a) && a != 0 && !std::isnan(diff) ? diff / std::fabs(a) : kNoData;
}

// An interval wider than rounding: resamples that all give one value (up to the last bits of
// their sums) say nothing of the noise.
bool has_width(const ConfidenceInterval& ci) {
  const double scale = std::max({1.0, std::fabs(ci.lo), std::fabs(ci.hi)});
  return ci.hi - ci.lo > 1e-9 * scale;
}

std::vector<double> summary_figures(const RunSummary& s) {
  const bool ttft = s.ttft_ms.count + s.ttft_ms.num_censored > 0,
             tpot = s.tpot_ms.count + s.tpot_ms.num_censored > 0, rates = s.has.rates;
  return {or_no_data(s.ttft_ms.p50, ttft),
          or_no_data(s.ttft_ms.p99, ttft),
          or_no_data(s.tpot_ms.p50, tpot),
          or_no_data(s.tpot_ms.p99, tpot),
          or_no_data(s.output_tokens_per_s, rates),
          or_no_data(s.requests_per_s, rates),
          or_no_data(s.slo.goodput_req_per_s, rates),
          or_no_data(s.slo.attainment, s.has.attainment)};
}

// The run-level rows (no per-request units): every policy action count ("action:<name>"), and
// the figures of the mechanisms a run has, named as CompareResult::mechanisms says. A run without
// the mechanism reports what it does without it (no lower fidelity: 0 hits, 0 load time; no drafts:
// one token per verification, no draft time), so that either side of a comparison has a value.
std::map<std::string, double> run_level(const RunOutput& out) {
  std::map<std::string, double> m;
  for (const auto& [name, n] : out.summary.counters.actions) {
    m["action:" + name] = static_cast<double>(n);
  }
  const RunSummary& s = out.summary;
  const KvTierCounters& k = s.counters.kv_tiers;
  m["prefix_hit_rate"] = or_no_data(s.prefix_cache_hit_rate, s.has.prefix_cache);
  const bool lookups = k.lookup_blocks > 0;
  m["kv_lower_tier_hit_rate"] =
      k.enabled ? or_no_data(static_cast<double>(k.hit_blocks[1] + k.hit_blocks[2]) /
                                 static_cast<double>(k.lookup_blocks),
                             lookups)
                : 0.0;
  m["kv_load_ms_mean"] = s.kv_load_ms.count > 0 ? s.kv_load_ms.mean : 0.0;
  const SpeculativeTotals& t = out.speculative;
  m["tokens_per_verification"] =
      t.num_verifications > 0
          ? static_cast<double>(t.committed_tokens) / static_cast<double>(t.num_verifications)
          : 1.0;
  m["draft_time_share"] =
      t.step_ns > 0 ? static_cast<double>(t.draft_ns) / static_cast<double>(t.step_ns) : 0.0;
  return m;
}

// The run-level rows two runs are compared on: their actions, the KV rows when either has
// [kv_tiers], the speculative rows when either drafted.
std::set<std::string> run_level_names(const RunOutput& a, const RunOutput& b) {
  std::set<std::string> names;
  for (const RunOutput* out : {&a, &b}) {
    for (const auto& [name, n] : out->summary.counters.actions) names.insert("action:" + name);
  }
  if (a.summary.counters.kv_tiers.enabled || b.summary.counters.kv_tiers.enabled) {
    names.insert({"prefix_hit_rate", "kv_lower_tier_hit_rate", "kv_load_ms_mean"});
  }
  if (a.speculative.num_verifications > 0 || b.speculative.num_verifications > 0) {
    names.insert({"tokens_per_verification", "draft_time_share"});
  }
  return names;
}

bool is_action(const std::string& name) { return name.rfind("action:", 0) == 0; }

// What one request contributes to the figures, computed as summarize() does.
struct RequestFigures {
  double ttft_ms = -1;  // -1: no first token
  double tpot_ms = -1;  // -1: not completed, or fewer than two tokens
  // In flight at the end: the censored values RequestStats takes (-1: none).
  double ttft_censored_ms = -1, tpot_censored_ms = -1;
  bool completed = false;
  bool met_slo = false;  // slo_status kMet under the scenario's [slo] limits
  bool decided = false;  // slo_status kMet or kMissed
  int64_t generated_tokens = 0;
};

RequestFigures figures_of(const RequestRecord& r, const SloSpec& slo, SimTime end_ns) {
  RequestFigures f;
  if (r.ttft_ns() >= 0) f.ttft_ms = to_ms(r.ttft_ns());
  f.generated_tokens = r.generated_tokens;
  f.completed = r.outcome == RequestOutcome::kCompleted;
  if (f.completed) {
    double tp = r.tpot_ns();
    if (tp >= 0) f.tpot_ms = tp / 1e6;
  }
  if (r.outcome == RequestOutcome::kInFlight) {
    if (r.first_token_ns < 0) {
      f.ttft_censored_ms = to_ms(end_ns - r.arrival_ns);
    } else if (r.output_tokens >= 2) {
      f.tpot_censored_ms =
          to_ms(end_ns - r.first_token_ns) / static_cast<double>(r.output_tokens - 1);
    }
  }
  SloStatus st = slo_status(r, end_ns, slo.ttft_ms, slo.tpot_ms);
  f.met_slo = st == SloStatus::kMet;
  f.decided = st != SloStatus::kUndecided;
  return f;
}

// The figures of metric_names() over the requests at `rows` (nullptr entries are absent in this
// run), written to out (size 8); NaN where there is no data.
void figures_over(const std::vector<const RequestFigures*>& rows, double duration_s,
                  std::span<double> out) {
  // As the run summary computes them: with the censored requests (Kaplan-Meier).
  PercentileSketch ttft, tpot;
  std::vector<double> ttft_censored, tpot_censored;
  int64_t tokens = 0, completed = 0, met = 0, decided = 0;
  for (const RequestFigures* f : rows) {
    if (!f) continue;
    if (f->ttft_ms >= 0) ttft.add(f->ttft_ms);
    if (f->tpot_ms >= 0) tpot.add(f->tpot_ms);
    if (f->ttft_censored_ms >= 0) ttft_censored.push_back(f->ttft_censored_ms);
    if (f->tpot_censored_ms >= 0) tpot_censored.push_back(f->tpot_censored_ms);
    tokens += f->generated_tokens;
    completed += f->completed;
    met += f->met_slo;
    decided += f->decided;
  }
  const Percentiles t = ttft.summary_with_censored(std::move(ttft_censored));
  const Percentiles p = tpot.summary_with_censored(std::move(tpot_censored));
  const bool rates = duration_s > 0;
  const double per_s = rates ? 1.0 / duration_s : 0.0;
  const bool has_t = t.count + t.num_censored > 0, has_p = p.count + p.num_censored > 0;
  out[0] = or_no_data(t.p50, has_t);
  out[1] = or_no_data(t.p99, has_t);
  out[2] = or_no_data(p.p50, has_p);
  out[3] = or_no_data(p.p99, has_p);
  out[4] = or_no_data(static_cast<double>(tokens) * per_s, rates);
  out[5] = or_no_data(static_cast<double>(completed) * per_s, rates);
  out[6] = or_no_data(static_cast<double>(met) * per_s, rates);
  out[7] = decided > 0 ? static_cast<double>(met) / static_cast<double>(decided) : kNoData;
}

struct RunPair {
  RunOutput a, b;
};

void compare_by_requests(const Scenario& sa, const Scenario& sb, const RunPair& runs,
                         const BootstrapOptions& boot, CompareResult& result) {
  using Key = std::pair<int32_t, int32_t>;  // (request id, attempt)
  std::map<Key, std::pair<const RequestRecord*, const RequestRecord*>> by_id;
  // The measured window of both (steady state, docs/outputs.md): from the later warm-up's end.
  const SimTime from_ns = from_seconds(
      std::max(runs.a.summary.measurement.warmup_s, runs.b.summary.measurement.warmup_s));
  for (const RequestRecord& r : runs.a.requests) {
    if (r.arrival_ns >= from_ns) by_id[{r.request_id, r.attempt_idx}].first = &r;
  }
  for (const RequestRecord& r : runs.b.requests) {
    if (r.arrival_ns >= from_ns) by_id[{r.request_id, r.attempt_idx}].second = &r;
  }
  std::vector<RequestFigures> fa, fb;
  std::vector<const RequestFigures*> units_a, units_b;  // per unit (id), nullptr when absent
  fa.reserve(by_id.size());
  fb.reserve(by_id.size());
  std::vector<int64_t> paired_units;  // units with a first token in both runs
  for (const auto& [key, recs] : by_id) {
    const RequestFigures* pa = nullptr;
    const RequestFigures* pb = nullptr;
    if (recs.first) pa = &fa.emplace_back(figures_of(*recs.first, sa.slo, runs.a.end_ns));
    if (recs.second) pb = &fb.emplace_back(figures_of(*recs.second, sb.slo, runs.b.end_ns));
    if (pa && pb) {
      ++result.num_matched;
      if (recs.first->arrival_ns == recs.second->arrival_ns &&
          recs.first->prompt_tokens == recs.second->prompt_tokens) {
        ++result.num_identical;
      }
      if (pa->ttft_ms >= 0 && pb->ttft_ms >= 0) {
        paired_units.push_back(static_cast<int64_t>(units_a.size()));
      }
    }
    units_a.push_back(pa);
    units_b.push_back(pb);
  }
  result.num_requests_a = static_cast<int64_t>(runs.a.requests.size());
  result.num_requests_b = static_cast<int64_t>(runs.b.requests.size());
  std::vector<char> paired(units_a.size(), 0);
  for (int64_t u : paired_units) paired[static_cast<size_t>(u)] = 1;

  const int32_t num_figures = static_cast<int32_t>(metric_names().size());
  // Statistics: the figures' differences B - A, then the paired TTFT mean difference, A's mean
  // and B's mean over the resampled matched requests.
  const double dur_a = to_seconds(runs.a.end_ns - from_ns),
               dur_b = to_seconds(runs.b.end_ns - from_ns);
  StatisticsFn fn = [&](std::span<const int64_t> idx, std::span<double> out) {
    std::vector<const RequestFigures*> ra, rb;
    ra.reserve(idx.size());
    rb.reserve(idx.size());
    double sum_a = 0, sum_b = 0;
    int64_t num_paired = 0;
    for (int64_t i : idx) {
      const RequestFigures* pa = units_a[static_cast<size_t>(i)];
      const RequestFigures* pb = units_b[static_cast<size_t>(i)];
      ra.push_back(pa);
      rb.push_back(pb);
      if (paired[static_cast<size_t>(i)]) {
        sum_a += pa->ttft_ms;
        sum_b += pb->ttft_ms;
        ++num_paired;
      }
    }
    std::vector<double> va(static_cast<size_t>(num_figures)), vb(static_cast<size_t>(num_figures));
    figures_over(ra, dur_a, va);
    figures_over(rb, dur_b, vb);
    for (int32_t m = 0; m < num_figures; ++m) out[m] = vb[m] - va[m];
    double n = static_cast<double>(num_paired);
    out[num_figures] = num_paired > 0 ? (sum_b - sum_a) / n : kNoData;
    out[num_figures + 1] = num_paired > 0 ? sum_a / n : kNoData;
    out[num_figures + 2] = num_paired > 0 ? sum_b / n : kNoData;
  };
  std::vector<ConfidenceInterval> cis = bootstrap_cis(
      std::max<int64_t>(1, static_cast<int64_t>(units_a.size())), num_figures + 3, fn, boot);
  std::vector<double> a = summary_figures(runs.a.summary), b = summary_figures(runs.b.summary);
  for (int32_t m = 0; m < num_figures; ++m) {
    const ConfidenceInterval& ci = cis[static_cast<size_t>(m)];
    MetricComparison c;
    c.metric = metric_names()[static_cast<size_t>(m)];
    c.unit = unit_of(c.metric);
    c.a = a[static_cast<size_t>(m)];
    c.b = b[static_cast<size_t>(m)];
    c.diff = c.b - c.a;
    c.rel_diff = relative(c.a, c.diff);
    // Resamples that all give one value say nothing of the noise: no interval then.
    c.has_ci = !units_a.empty() && !std::isnan(c.diff) && !std::isnan(ci.lo) && has_width(ci);
    c.ci_lo = ci.lo;
    c.ci_hi = ci.hi;
    result.metrics.push_back(c);
  }
  const ConfidenceInterval& paired_ci = cis[static_cast<size_t>(num_figures)];
  MetricComparison paired_row;
  paired_row.metric = "ttft_paired_mean_diff_ms";
  paired_row.unit = "ms";
  paired_row.difference_only = true;
  paired_row.a = cis[static_cast<size_t>(num_figures) + 1].estimate;
  paired_row.b = cis[static_cast<size_t>(num_figures) + 2].estimate;
  paired_row.diff = paired_ci.estimate;
  paired_row.rel_diff = relative(paired_row.a, paired_row.diff);
  paired_row.has_ci = !paired_units.empty() && !std::isnan(paired_ci.lo) && has_width(paired_ci);
  paired_row.ci_lo = paired_ci.lo;
  paired_row.ci_hi = paired_ci.hi;
  result.metrics.push_back(paired_row);
  const std::map<std::string, double> level_a = run_level(runs.a), level_b = run_level(runs.b);
  auto value = [](const std::map<std::string, double>& level, const std::string& name) {
    auto it = level.find(name);
    return it == level.end() ? 0.0 : it->second;  // an action the run never took
  };
  for (const std::string& name : run_level_names(runs.a, runs.b)) {
    MetricComparison c;
    c.metric = name;
    c.unit = unit_of(c.metric);
    c.a = value(level_a, name);
    c.b = value(level_b, name);
    c.diff = c.b - c.a;
    c.rel_diff = relative(c.a, c.diff);
    (is_action(name) ? result.actions : result.mechanisms).push_back(c);
  }
}

void compare_by_replications(const std::vector<RunPair>& runs, const BootstrapOptions& boot,
                             CompareResult& result) {
  const size_t num_reps = runs.size();
  std::set<std::string> names;
  for (const RunPair& r : runs) {
    const std::set<std::string> n = run_level_names(r.a, r.b);
    names.insert(n.begin(), n.end());
  }
  std::vector<std::string> labels = metric_names();
  labels.insert(labels.end(), names.begin(), names.end());
  // values_a[rep][stat], values_b[rep][stat]
  std::vector<std::vector<double>> va(num_reps), vb(num_reps);
  for (size_t r = 0; r < num_reps; ++r) {
    va[r] = summary_figures(runs[r].a.summary);
    vb[r] = summary_figures(runs[r].b.summary);
    const std::map<std::string, double> level_a = run_level(runs[r].a),
                                        level_b = run_level(runs[r].b);
    for (const std::string& name : names) {
      auto value = [&](const std::map<std::string, double>& level) {
        auto it = level.find(name);
        return it == level.end() ? 0.0 : it->second;
      };
      va[r].push_back(value(level_a));
      vb[r].push_back(value(level_b));
    }
  }
  const int32_t num_stats = static_cast<int32_t>(labels.size());
  // The mean paired difference over the replications where both runs have the figure (NaN: none).
  StatisticsFn fn = [&](std::span<const int64_t> idx, std::span<double> out) {
    for (int32_t s = 0; s < num_stats; ++s) {
      double sum = 0;
      int64_t n = 0;
      for (int64_t i : idx) {
        double d = vb[static_cast<size_t>(i)][static_cast<size_t>(s)] -
                   va[static_cast<size_t>(i)][static_cast<size_t>(s)];
        if (std::isnan(d)) continue;
        sum += d;
        ++n;
      }
      out[s] = n > 0 ? sum / static_cast<double>(n) : kNoData;
    }
  };
  std::vector<ConfidenceInterval> cis =
      bootstrap_cis(static_cast<int64_t>(num_reps), num_stats, fn, boot);
  // Each run's mean over the replications where it has the figure (NaN: none).
  auto mean_of = [&](const std::vector<std::vector<double>>& v, size_t s) {
    double sum = 0;
    int64_t n = 0;
    for (size_t r = 0; r < num_reps; ++r) {
      if (std::isnan(v[r][s])) continue;
      sum += v[r][s];
      ++n;
    }
    return n > 0 ? sum / static_cast<double>(n) : kNoData;
  };
  for (int32_t s = 0; s < num_stats; ++s) {
    const ConfidenceInterval& ci = cis[static_cast<size_t>(s)];
    MetricComparison m;
    m.metric = labels[static_cast<size_t>(s)];
    m.unit = unit_of(m.metric);
    m.a = mean_of(va, static_cast<size_t>(s));
    m.b = mean_of(vb, static_cast<size_t>(s));
    m.diff = ci.estimate;
    m.rel_diff = relative(m.a, m.diff);
    m.has_ci = !std::isnan(ci.estimate) && !std::isnan(ci.lo) && has_width(ci);
    m.ci_lo = ci.lo;
    m.ci_hi = ci.hi;
    (s < static_cast<int32_t>(metric_names().size()) ? result.metrics
     : is_action(m.metric)                           ? result.actions
                                                     : result.mechanisms)
        .push_back(m);
  }
}

}  // namespace

CompareResult compare_scenarios(const Scenario& a, const Scenario& b,
                                const CompareOptions& options) {
  MOESIM_CHECK(options.num_replications >= 1 && options.num_threads >= 1, "compare options");
  CompareResult result;
  for (int32_t r = 0; r < options.num_replications; ++r) {
    result.seeds.push_back(options.seed + static_cast<uint64_t>(r));
  }
  // Job 2r runs A with seed r, job 2r + 1 runs B with the same seed.
  std::vector<RunPair> runs(result.seeds.size());
  run_in_order<RunOutput>(
      2 * static_cast<int64_t>(result.seeds.size()), options.num_threads,
      [&](int64_t j) {
        return simulate(j % 2 == 0 ? a : b, result.seeds[static_cast<size_t>(j / 2)],
                        /*keep_requests=*/true);
      },
      [&](int64_t j, RunOutput& out) {
        RunPair& pair = runs[static_cast<size_t>(j / 2)];
        (j % 2 == 0 ? pair.a : pair.b) = std::move(out);
      },
      options.progress);
  for (const RunPair& p : runs) {
    result.digests_a.push_back(p.a.digest_hex);
    result.digests_b.push_back(p.b.digest_hex);
    result.conservation_ok = result.conservation_ok && p.a.conservation_ok && p.b.conservation_ok;
    result.identical = result.identical && p.a.digest_hex == p.b.digest_hex;
    for (const RunOutput* out : {&p.a, &p.b}) {
      const MeasurementSummary& m = out->summary.measurement;
      if (!m.analysed || m.converged) continue;
      (out == &p.a ? result.num_not_converged_a : result.num_not_converged_b)++;
      if (result.not_converged_reason.empty()) result.not_converged_reason = m.reason;
    }
  }
  BootstrapOptions boot{options.num_resamples, options.confidence, options.seed};
  if (options.num_replications == 1) {
    result.method = "requests";
    compare_by_requests(a, b, runs.front(), boot, result);
  } else {
    result.method = "replications";
    compare_by_replications(runs, boot, result);
  }
  return result;
}

}  // namespace moesim::sim::study
