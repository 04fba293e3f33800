#include "sim/study/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/core/check.h"
#include "sim/metrics/figure_text.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/simulate.h"

namespace moesim::sim::study {
namespace {

const Percentiles& percentiles_of(const RunSummary& s, const std::string& name) {
  std::string metric = name.substr(0, name.find('_'));
  return metric == "ttft"   ? s.ttft_ms
         : metric == "tpot" ? s.tpot_ms
         : metric == "e2e"  ? s.e2e_ms
                            : s.queueing_ms;
}

int64_t percentile_count(const RunSummary& s, const std::string& name) {
  return percentiles_of(s, name).count;
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

SloVerdict judge_run(const RunOutput& out, const Scenario& scenario, const SearchSlo& slo) {
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
    if (percentile_count(out.summary, l.name) == 0) {
      v.reason = l.name + " n/a (no samples)";
      return v;
    }
    double x = percentile_of(out.summary, l.name);
    if (x > l.limit_ms) {
      v.reason = l.name + " " + format_g(x) + " > " + format_g(l.limit_ms);
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
  v.meets = true;
  return v;
}

MultiplierSearch search_max_multiplier(const std::function<bool(double)>& meets,
                                       double rel_tolerance, int32_t max_doublings) {
  MOESIM_CHECK(rel_tolerance > 0 && max_doublings >= 0, "search options");
  MultiplierSearch s;
  auto probe = [&](double m) {
    ++s.num_probes;
    return meets(m);
  };
  double lo = 0, hi = 0;  // highest meeting, lowest failing (0: none yet)
  if (probe(1.0)) {
    lo = 1.0;
    for (int32_t k = 0; k < max_doublings; ++k) {
      double m = lo * 2.0;
      if (!probe(m)) {
        hi = m;
        break;
      }
      lo = m;
    }
  } else {
    hi = 1.0;
    for (int32_t k = 0; k < max_doublings; ++k) {
      double m = hi / 2.0;
      if (probe(m)) {
        lo = m;
        break;
      }
      hi = m;
    }
  }
  if (lo > 0 && hi > 0) {
    while (hi / lo > 1.0 + rel_tolerance) {
      double mid = std::sqrt(lo * hi);
      if (probe(mid)) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
  }
  s.found = lo > 0;
  s.max_ok = lo;
  s.min_fail = hi;
  return s;
}

double base_rate_per_s(const Scenario& scenario) {
  const WorkloadSpec& w = scenario.workload;
  switch (w.kind) {
    case WorkloadKind::kSynthetic:
      return w.synthetic.arrival.rate_per_s;
    case WorkloadKind::kAgent:
      return w.agent.arrival.rate_per_s;
    case WorkloadKind::kMooncake:
    case WorkloadKind::kAzure:
      break;
  }
  // The window the workload generator replays: [start_s, end_s), at most max_requests rows.
  const TraceWorkloadSpec& tr = w.trace;
  if (!tr.records || tr.records->empty()) return 0.0;
  const std::vector<TraceRecord>& rows = *tr.records;
  auto by_time = [](const TraceRecord& r, SimTime t_ns) { return r.timestamp_ns < t_ns; };
  const SimTime start_ns = from_seconds(tr.start_s);
  size_t lo = std::lower_bound(rows.begin(), rows.end(), start_ns, by_time) - rows.begin();
  size_t hi = rows.size();
  if (tr.end_s) {
    hi =
        std::lower_bound(rows.begin(), rows.end(), from_seconds(*tr.end_s), by_time) - rows.begin();
  }
  if (tr.max_requests) hi = std::min<size_t>(hi, lo + static_cast<size_t>(*tr.max_requests));
  if (hi <= lo + 1) return 0.0;
  double span_s = to_seconds(rows[hi - 1].timestamp_ns - start_ns);
  if (span_s <= 0) return 0.0;
  return static_cast<double>(hi - lo) / span_s * tr.rate_multiplier;
}

const char* rate_unit(const Scenario& scenario) {
  return scenario.workload.kind == WorkloadKind::kAgent ? "sessions/s" : "req/s";
}

Override rate_override(const Scenario& scenario, double multiplier) {
  const WorkloadSpec& w = scenario.workload;
  switch (w.kind) {
    case WorkloadKind::kSynthetic:
      return {"workload.arrival.rate_per_s", w.synthetic.arrival.rate_per_s * multiplier};
    case WorkloadKind::kAgent:
      return {"workload.arrival.rate_per_s", w.agent.arrival.rate_per_s * multiplier};
    case WorkloadKind::kMooncake:
    case WorkloadKind::kAzure:
      break;
  }
  return {"workload.rate_multiplier", w.trace.rate_multiplier * multiplier};
}

std::optional<size_t> cheapest_config(const std::vector<ConfigSearch>& configs,
                                      double target_rate_per_s) {
  std::optional<size_t> best;
  for (size_t i = 0; i < configs.size(); ++i) {
    const ConfigSearch& c = configs[i];
    if (!c.error.empty() || !c.search.found || c.diagnosis.infeasible() ||
        c.max_rate_per_s < target_rate_per_s) {
      continue;
    }
    if (!best || c.num_gpus < configs[*best].num_gpus ||
        (c.num_gpus == configs[*best].num_gpus &&
         c.max_rate_per_s > configs[*best].max_rate_per_s)) {
      best = i;
    }
  }
  return best;
}

const RateProbe* best_probe(const ConfigSearch& c) {
  if (!c.search.found) return nullptr;
  for (const RateProbe& p : c.probes) {
    if (p.verdict.meets && p.multiplier == c.search.max_ok) return &p;
  }
  return nullptr;
}

Plan search_plan(const SearchResult& result, const std::vector<std::string>& parameter_keys,
                 const SearchSlo& slo, std::optional<double> target_rate_per_s) {
  Plan plan;
  plan.command = "search";
  plan.limits = slo_limits_text(slo);
  plan.parameter_keys = parameter_keys;
  for (const ConfigSearch& c : result.configs) {
    PlanEntry e;
    e.config_idx = c.config_idx;
    for (const Override& o : c.overrides)
      e.parameter_values.push_back(override_value_text(o.value));
    if (!c.overrides.empty()) e.parameters = overrides_text(c.overrides);
    e.error = c.error;
    e.num_gpus = c.num_gpus;
    e.num_runs = c.search.num_probes;
    e.price = c.price;
    if (const RateProbe* p = best_probe(c)) {
      e.rate_per_s = c.max_rate_per_s;
      e.input_tokens_per_s = p->input_tokens_per_s;
      e.output_tokens_per_s = p->output_tokens_per_s;
      e.ttft_p99_ms = p->ttft_p99_ms;
      e.tpot_p99_ms = p->tpot_p99_ms;
      if (p->verdict.num_decided > 0) e.slo_attainment = p->verdict.attainment;
    }
    if (!c.error.empty()) {
      e.infeasible_reason = "did not run";
    } else if (c.not_probed || c.diagnosis.infeasible()) {
      e.infeasible_reason = c.diagnosis.verdict();
    } else if (!c.search.found) {
      e.infeasible_reason =
          "meets the SLOs at no probed rate" +
          (c.probes.empty() ? std::string()
                            : " (lowest probed: " + c.probes.back().verdict.reason + ")");
    } else if (target_rate_per_s && c.max_rate_per_s < *target_rate_per_s) {
      e.infeasible_reason = "max rate " + number_text(c.max_rate_per_s) + " " + c.rate_unit +
                            " < the target " + number_text(*target_rate_per_s);
    } else {
      e.feasible = true;
    }
    e.cost = cost_figures(e.num_gpus, e.input_tokens_per_s, e.output_tokens_per_s, e.price);
    plan.entries.push_back(std::move(e));
  }
  mark_pareto(plan.entries);
  if (target_rate_per_s) {
    plan.cheapest = cheapest_config(result.configs, *target_rate_per_s);
    plan.cheapest_rule =
        "fewest GPUs sustaining the target rate " + number_text(*target_rate_per_s);
  } else {
    plan.cheapest = cheapest_feasible(plan.entries);
    plan.cheapest_rule = "lowest cost per million output tokens at its max rate";
  }
  return plan;
}

SearchResult search_rates(const ScenarioTemplate& scenario,
                          const std::vector<std::vector<Override>>& configs, const SearchSlo& slo,
                          const SearchOptions& options,
                          const std::function<void(int64_t, int64_t)>& progress) {
  MOESIM_CHECK(options.already_done.empty() || options.already_done.size() == configs.size(),
               "one already-done flag per configuration");
  SearchResult result;
  result.configs.resize(configs.size());
  auto job = [&](int64_t i) -> ConfigSearch {
    ConfigSearch c;
    c.config_idx = i;
    c.overrides = configs[static_cast<size_t>(i)];
    if (i % options.shard_count != options.shard_index) return c;
    if (!options.already_done.empty() && options.already_done[static_cast<size_t>(i)]) return c;
    try {
      Scenario base = scenario.instantiate(c.overrides);
      c.num_gpus = num_gpus(base);
      c.rate_unit = rate_unit(base);
      c.base_rate_per_s = base_rate_per_s(base);
      if (base.workload.kind == WorkloadKind::kMooncake ||
          base.workload.kind == WorkloadKind::kAzure) {
        c.trace_multiplier = base.workload.trace.rate_multiplier;
        c.trace_rate_per_s = c.base_rate_per_s / c.trace_multiplier;
      }
      c.price = gpu_price(base, options.gpu_price_per_hour);
      const uint64_t seed = options.seed.value_or(base.run.seed);
      if (options.diagnose) {
        c.diagnosis = diagnose_scenario(base, slo, seed);
        if (c.diagnosis.infeasible() && !options.probe_infeasible) {
          c.not_probed = true;
          return c;
        }
      }
      auto meets = [&](double m) {
        std::vector<Override> probe_overrides = c.overrides;
        probe_overrides.push_back(rate_override(base, m));
        Scenario sc = scenario.instantiate(probe_overrides);
        // The summary then counts SLO attainment with the search's limits (judge_run).
        sc.slo.ttft_ms = slo.request_ttft_ms.value_or(sc.slo.ttft_ms);
        sc.slo.tpot_ms = slo.request_tpot_ms.value_or(sc.slo.tpot_ms);
        RunOutput out = simulate(sc, seed);
        RateProbe p{m, c.base_rate_per_s * m, judge_run(out, sc, slo)};
        const RunSummary& s = out.summary;
        if (s.has.rates) {
          p.input_tokens_per_s = s.input_tokens_per_s;
          p.output_tokens_per_s = s.output_tokens_per_s;
        }
        if (s.ttft_ms.count > 0) p.ttft_p99_ms = s.ttft_ms.p99;
        if (s.tpot_ms.count > 0) p.tpot_p99_ms = s.tpot_ms.p99;
        c.probes.push_back(p);
        return p.verdict.meets;
      };
      c.search = search_max_multiplier(meets, options.rel_tolerance, options.max_doublings);
      c.max_rate_per_s = c.base_rate_per_s * c.search.max_ok;
      c.fail_rate_per_s = c.base_rate_per_s * c.search.min_fail;
    } catch (const ConfigError& e) {
      c.error = e.what();
    }
    return c;
  };
  run_in_order<ConfigSearch>(
      static_cast<int64_t>(configs.size()), options.num_threads, job,
      [&](int64_t i, ConfigSearch& c) {
        const bool searched =
            i % options.shard_count == options.shard_index &&
            (options.already_done.empty() || !options.already_done[static_cast<size_t>(i)]);
        if (searched && options.on_searched) options.on_searched(c);
        result.configs[static_cast<size_t>(i)] = std::move(c);
      },
      progress);

  if (options.target_rate_per_s && options.shard_count == 1) {
    result.cheapest = cheapest_config(result.configs, *options.target_rate_per_s);
  }
  return result;
}

}  // namespace moesim::sim::study
