#include "sim/study/compare.h"

#include <map>
#include <set>
#include <utility>

#include "sim/core/check.h"
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

std::vector<double> summary_figures(const RunSummary& s) {
  return {s.ttft_ms.p50,         s.ttft_ms.p99,    s.tpot_ms.p50,           s.tpot_ms.p99,
          s.output_tokens_per_s, s.requests_per_s, s.slo.goodput_req_per_s, s.slo.attainment};
}

// What one request contributes to the figures, computed as summarize() does.
struct RequestFigures {
  double ttft_ms = -1;  // -1: no first token
  double tpot_ms = -1;  // -1: not completed, or fewer than two tokens
  bool completed = false;
  bool met_slo = false;  // completed within the scenario's [slo] limits
  int64_t generated_tokens = 0;
};

RequestFigures figures_of(const RequestRecord& r, const SloSpec& slo) {
  RequestFigures f;
  if (r.ttft_ns() >= 0) f.ttft_ms = to_ms(r.ttft_ns());
  f.generated_tokens = r.generated_tokens;
  f.completed = r.outcome == RequestOutcome::kCompleted;
  if (f.completed) {
    double tp = r.tpot_ns();
    if (tp >= 0) f.tpot_ms = tp / 1e6;
    f.met_slo = f.ttft_ms <= slo.ttft_ms && (tp < 0 || tp / 1e6 <= slo.tpot_ms);
  }
  return f;
}

// The figures of metric_names() over the requests at `rows` (nullptr entries are absent in this
// run), written to out (size 8).
void figures_over(const std::vector<const RequestFigures*>& rows, double duration_s,
                  std::span<double> out) {
  std::vector<double> ttft, tpot;
  int64_t tokens = 0, completed = 0, met = 0;
  for (const RequestFigures* f : rows) {
    if (!f) continue;
    if (f->ttft_ms >= 0) ttft.push_back(f->ttft_ms);
    if (f->tpot_ms >= 0) tpot.push_back(f->tpot_ms);
    tokens += f->generated_tokens;
    completed += f->completed;
    met += f->met_slo;
  }
  Percentiles t = percentiles(std::move(ttft));
  Percentiles p = percentiles(std::move(tpot));
  double per_s = duration_s > 0 ? 1.0 / duration_s : 0.0;
  out[0] = t.p50;
  out[1] = t.p99;
  out[2] = p.p50;
  out[3] = p.p99;
  out[4] = static_cast<double>(tokens) * per_s;
  out[5] = static_cast<double>(completed) * per_s;
  out[6] = static_cast<double>(met) * per_s;
  out[7] = completed > 0 ? static_cast<double>(met) / static_cast<double>(completed) : 0.0;
}

struct RunPair {
  RunOutput a, b;
};

void compare_by_requests(const Scenario& sa, const Scenario& sb, const RunPair& runs,
                         const BootstrapOptions& boot, CompareResult& result) {
  using Key = std::pair<int32_t, int32_t>;  // (request id, attempt)
  std::map<Key, std::pair<const RequestRecord*, const RequestRecord*>> by_id;
  for (const RequestRecord& r : runs.a.requests) by_id[{r.request_id, r.attempt_idx}].first = &r;
  for (const RequestRecord& r : runs.b.requests) by_id[{r.request_id, r.attempt_idx}].second = &r;
  std::vector<RequestFigures> fa, fb;
  std::vector<const RequestFigures*> units_a, units_b;  // per unit (id), nullptr when absent
  fa.reserve(by_id.size());
  fb.reserve(by_id.size());
  std::vector<int64_t> paired_units;  // units with a first token in both runs
  for (const auto& [key, recs] : by_id) {
    const RequestFigures* pa = nullptr;
    const RequestFigures* pb = nullptr;
    if (recs.first) pa = &fa.emplace_back(figures_of(*recs.first, sa.slo));
    if (recs.second) pb = &fb.emplace_back(figures_of(*recs.second, sb.slo));
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
  const double dur_a = runs.a.summary.duration_s, dur_b = runs.b.summary.duration_s;
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
    double n = num_paired > 0 ? static_cast<double>(num_paired) : 1.0;
    out[num_figures] = (sum_b - sum_a) / n;
    out[num_figures + 1] = sum_a / n;
    out[num_figures + 2] = sum_b / n;
  };
  std::vector<ConfidenceInterval> cis = bootstrap_cis(
      std::max<int64_t>(1, static_cast<int64_t>(units_a.size())), num_figures + 3, fn, boot);
  std::vector<double> a = summary_figures(runs.a.summary), b = summary_figures(runs.b.summary);
  for (int32_t m = 0; m < num_figures; ++m) {
    const ConfidenceInterval& ci = cis[static_cast<size_t>(m)];
    result.metrics.push_back({metric_names()[static_cast<size_t>(m)], a[static_cast<size_t>(m)],
                              b[static_cast<size_t>(m)],
                              b[static_cast<size_t>(m)] - a[static_cast<size_t>(m)],
                              !units_a.empty(), ci.lo, ci.hi});
  }
  const ConfidenceInterval& paired_ci = cis[static_cast<size_t>(num_figures)];
  result.metrics.push_back({"ttft_paired_mean_diff_ms",
                            cis[static_cast<size_t>(num_figures) + 1].estimate,
                            cis[static_cast<size_t>(num_figures) + 2].estimate, paired_ci.estimate,
                            !paired_units.empty(), paired_ci.lo, paired_ci.hi});
  std::set<std::string> names;
  for (const auto& [name, n] : runs.a.summary.counters.actions) names.insert(name);
  for (const auto& [name, n] : runs.b.summary.counters.actions) names.insert(name);
  auto count = [](const RunOutput& out, const std::string& name) {
    auto it = out.summary.counters.actions.find(name);
    return it == out.summary.counters.actions.end() ? 0.0 : static_cast<double>(it->second);
  };
  for (const std::string& name : names) {
    double ca = count(runs.a, name), cb = count(runs.b, name);
    result.actions.push_back({"action:" + name, ca, cb, cb - ca, false, 0, 0});
  }
}

void compare_by_replications(const std::vector<RunPair>& runs, const BootstrapOptions& boot,
                             CompareResult& result) {
  const size_t num_reps = runs.size();
  std::set<std::string> names;
  for (const RunPair& r : runs) {
    for (const auto& [name, n] : r.a.summary.counters.actions) names.insert(name);
    for (const auto& [name, n] : r.b.summary.counters.actions) names.insert(name);
  }
  std::vector<std::string> labels = metric_names();
  for (const std::string& name : names) labels.push_back("action:" + name);
  // values_a[rep][stat], values_b[rep][stat]
  std::vector<std::vector<double>> va(num_reps), vb(num_reps);
  for (size_t r = 0; r < num_reps; ++r) {
    va[r] = summary_figures(runs[r].a.summary);
    vb[r] = summary_figures(runs[r].b.summary);
    for (const std::string& name : names) {
      auto count = [&](const RunOutput& out) {
        auto it = out.summary.counters.actions.find(name);
        return it == out.summary.counters.actions.end() ? 0.0 : static_cast<double>(it->second);
      };
      va[r].push_back(count(runs[r].a));
      vb[r].push_back(count(runs[r].b));
    }
  }
  const int32_t num_stats = static_cast<int32_t>(labels.size());
  StatisticsFn fn = [&](std::span<const int64_t> idx, std::span<double> out) {
    for (int32_t s = 0; s < num_stats; ++s) {
      double sum = 0;
      for (int64_t i : idx) {
        sum += vb[static_cast<size_t>(i)][static_cast<size_t>(s)] -
               va[static_cast<size_t>(i)][static_cast<size_t>(s)];
      }
      out[s] = sum / static_cast<double>(idx.size());
    }
  };
  std::vector<ConfidenceInterval> cis =
      bootstrap_cis(static_cast<int64_t>(num_reps), num_stats, fn, boot);
  for (int32_t s = 0; s < num_stats; ++s) {
    double mean_a = 0, mean_b = 0;
    for (size_t r = 0; r < num_reps; ++r) {
      mean_a += va[r][static_cast<size_t>(s)];
      mean_b += vb[r][static_cast<size_t>(s)];
    }
    mean_a /= static_cast<double>(num_reps);
    mean_b /= static_cast<double>(num_reps);
    const ConfidenceInterval& ci = cis[static_cast<size_t>(s)];
    MetricComparison m{
        labels[static_cast<size_t>(s)], mean_a, mean_b, ci.estimate, true, ci.lo, ci.hi};
    (s < static_cast<int32_t>(metric_names().size()) ? result.metrics : result.actions)
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
        return simulate(j % 2 == 0 ? a : b, result.seeds[static_cast<size_t>(j / 2)]);
      },
      [&](int64_t j, RunOutput& out) {
        RunPair& pair = runs[static_cast<size_t>(j / 2)];
        (j % 2 == 0 ? pair.a : pair.b) = std::move(out);
      });
  for (const RunPair& p : runs) {
    result.digests_a.push_back(p.a.digest_hex);
    result.digests_b.push_back(p.b.digest_hex);
    result.conservation_ok = result.conservation_ok && p.a.conservation_ok && p.b.conservation_ok;
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
