#include "sim/study/slo_verdict.h"

#include <cmath>
#include <cstdio>

#include "sim/metrics/figure_text.h"

namespace moesim::sim::study {
namespace {

const Percentiles& percentiles_of(const RunSummary& s, const std::string& name) {
  std::string metric = name.substr(0, name.find('_'));
  return metric == "ttft"   ? s.ttft_ms
         : metric == "tpot" ? s.tpot_ms
         : metric == "e2e"  ? s.e2e_ms
                            : s.queueing_ms;
}

bool is_lower_bound(const Percentiles& pc, const std::string& name) {
  std::string p = name.substr(name.find('_') + 1, 3);
  return p == "p50" ? pc.lower_bound.p50 : p == "p90" ? pc.lower_bound.p90 : pc.lower_bound.p99;
}

double percentile_of(const RunSummary& s, const std::string& name) {
  const Percentiles& pc = percentiles_of(s, name);
  std::string p = name.substr(name.find('_') + 1, 3);
  return p == "p50" ? pc.p50 : p == "p90" ? pc.p90 : pc.p99;
}

std::string format_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

}  // namespace

SloWatchLimits watch_limits(const Scenario& scenario, const SearchSlo& slo) {
  SloWatchLimits w;
  for (const SearchSlo::Limit& l : slo.percentile_limits) {
    SloWatchLimits::Percentile p;
    p.name = l.name;
    p.limit_ms = l.limit_ms;
    const std::string metric = l.name.substr(0, l.name.find('_'));
    p.metric = metric == "ttft"   ? SloWatchLimits::Metric::kTtft
               : metric == "tpot" ? SloWatchLimits::Metric::kTpot
               : metric == "e2e"  ? SloWatchLimits::Metric::kE2e
                                  : SloWatchLimits::Metric::kQueueing;
    const std::string q = l.name.substr(l.name.find('_') + 1, 3);
    p.quantile = q == "p50" ? 0.50 : q == "p90" ? 0.90 : 0.99;
    w.percentiles.push_back(std::move(p));
  }
  w.ttft_ms = slo.request_ttft_ms.value_or(scenario.slo.ttft_ms);
  w.tpot_ms = slo.request_tpot_ms.value_or(scenario.slo.tpot_ms);
  w.min_attainment = slo.min_attainment;
  return w;
}

SloVerdict judge_run(const RunOutput& out, const Scenario& scenario, const SearchSlo& slo) {
  if (out.cancelled) {
    SloVerdict v;  // a probe the search no longer needs: never kept
    v.reason = "cancelled";
    return v;
  }
  if (!out.stopped_early.empty()) {
    // An early verdict: fails whatever the rest of the run would have done; the counts are the
    // part that ran.
    SloVerdict v;
    v.num_met = out.summary.slo.num_met;
    v.num_decided = out.summary.slo.num_decided;
    if (v.num_decided > 0) {
      v.attainment = static_cast<double>(v.num_met) / static_cast<double>(v.num_decided);
    }
    v.reason = out.stopped_early;
    return v;
  }
  const double ttft_limit_ms = slo.request_ttft_ms.value_or(scenario.slo.ttft_ms);
  const double tpot_limit_ms = slo.request_tpot_ms.value_or(scenario.slo.tpot_ms);
  // The run's summary counted the requests with the scenario's limits (a probe runs with the
  // search's); other limits need the run's kept records.
  SloCounts counts;
  if (out.summary.slo.ttft_ms == ttft_limit_ms && out.summary.slo.tpot_ms == tpot_limit_ms) {
    counts = {out.summary.slo.num_met, out.summary.slo.num_decided};
  } else {
    MOESIM_CHECK(!out.requests.empty() || out.summary.num_arrived == 0,
                 "judging other SLO limits than the run's needs its kept records");
    counts = count_slo(out.requests, out.end_ns, ttft_limit_ms, tpot_limit_ms);
  }
  SloVerdict v;
  v.num_met = counts.num_met;
  v.num_decided = counts.num_decided;
  if (v.num_decided > 0) {
    v.attainment = static_cast<double>(v.num_met) / static_cast<double>(v.num_decided);
  }
  for (const SearchSlo::Limit& l : slo.percentile_limits) {
    const Percentiles& pc = percentiles_of(out.summary, l.name);
    if (pc.count + pc.num_censored == 0) {
      v.reason = l.name + " n/a (no samples)";
      return v;
    }
    // With censored requests the figure is a Kaplan-Meier estimate, or a lower bound (">=").
    double x = percentile_of(out.summary, l.name);
    const bool bound = is_lower_bound(pc, l.name);
    if (x > l.limit_ms || (bound && x >= l.limit_ms)) {
      v.reason = l.name + (bound ? " >= " : " ") + format_g(x) + " > " + format_g(l.limit_ms);
      return v;
    }
    if (bound) {
      v.reason =
          l.name + " unknown (>= " + format_g(x) + ": too many requests in flight at the end)";
      v.not_converged = true;
      return v;
    }
  }
  if (v.num_decided == 0 && slo.min_attainment > 0) {
    v.reason = "attainment n/a (no request decided)";
    return v;
  }
  if (v.num_decided > 0 && v.attainment < slo.min_attainment) {
    v.reason = "attainment " + format_g(v.attainment) + " < " + format_g(slo.min_attainment);
    return v;
  }
  const MeasurementSummary& m = out.summary.measurement;
  if (m.analysed && !m.converged) {
    v.not_converged = true;
    v.reason = m.steady ? "not converged: " + m.reason : m.reason;
    return v;
  }
  v.meets = true;
  return v;
}

}  // namespace moesim::sim::study
