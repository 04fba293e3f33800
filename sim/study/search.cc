#include "sim/study/search.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <cstdio>
#include <exception>
#include <mutex>

#include "base/check.h"
#include "sim/config/config_error.h"
#include "sim/metrics/figure_text.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/simulate.h"

namespace moesim::sim::study {

double base_rate_per_s(const Scenario& scenario) {
  const WorkloadSpec& w = scenario.workload;
  switch (w.kind) {
    case WorkloadKind::kSynthetic:
      return w.synthetic.arrival.rate_per_s;
    case WorkloadKind::kAgent:
      return w.agent.arrival.rate_per_s;
    case WorkloadKind::kRequestTrace:
      return 0.0;  // fixed arrivals: no rate to scale
    case WorkloadKind::kMooncake:
    case WorkloadKind::kAzure:
      break;
  }
  const TraceWorkloadSpec& tr = w.trace;
  if (tr.replay != TraceReplay::kWindow)
    return trace_base_rate_per_s(tr) * trace_rate_multiplier(tr);
  // The window the workload generator replays: [start_s, end_s), at most max_requests rows.
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
    case WorkloadKind::kRequestTrace:
      throw ConfigError(w.request_trace_path, 0, 0, "workload.kind",
                        "a request trace's arrivals are fixed: it has no rate to search");
    case WorkloadKind::kMooncake:
    case WorkloadKind::kAzure:
      break;
  }
  if (w.trace.rate_per_s) return {"workload.rate_per_s", *w.trace.rate_per_s * multiplier};
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

std::optional<RateInterval> rate_interval(const ConfigSearch& c) {
  if (c.replicates.empty() || !c.error.empty()) return std::nullopt;
  std::vector<const MultiplierSearch*> all = {&c.search};
  for (const MultiplierSearch& r : c.replicates) all.push_back(&r);
  RateInterval iv;
  iv.num_seeds = static_cast<int32_t>(all.size());
  double lo_bracket = 0, hi_bracket = 0, sum = 0;
  std::vector<double> rates;
  for (const MultiplierSearch* s : all) {
    if (!s->found || s->min_fail <= 0) return std::nullopt;
    const double r = c.base_rate_per_s * s->max_ok, f = c.base_rate_per_s * s->min_fail;
    lo_bracket = rates.empty() ? r : std::min(lo_bracket, r);
    hi_bracket = std::max(hi_bracket, f);
    rates.push_back(r);
    sum += r;
  }
  const auto n = static_cast<double>(rates.size());
  iv.mean = sum / n;
  double ss = 0;
  for (double r : rates) ss += (r - iv.mean) * (r - iv.mean);
  const boost::math::students_t t_dist(n - 1);
  const double hw = boost::math::quantile(boost::math::complement(t_dist, 0.025)) *
                    std::sqrt(ss / (n - 1)) / std::sqrt(n);
  iv.lo = std::min(iv.mean - hw, lo_bracket);
  iv.hi = std::max(iv.mean + hw, hi_bracket);
  return iv;
}

std::string interval_text(double mean, double lo, double hi) {
  const double hw = std::max(hi - mean, mean - lo);
  const int decimals =
      hw > 0 ? std::clamp(1 - static_cast<int>(std::floor(std::log10(hw))), 0, 12) : 3;
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%.*f [%.*f, %.*f]", decimals, mean, decimals, lo, decimals, hi);
  return buf;
}

std::string no_rate_reason(const ConfigSearch& c) {
  std::string text = "meets the SLOs at no probed rate";
  if (c.probes.empty()) return text;
  const std::string& first = c.probes.front().verdict.reason;
  const std::string& lowest = c.probes.back().verdict.reason;
  text += " (";
  if (c.probes.size() > 1 && first != lowest) text += "at x base 1: " + first + "; ";
  return text + "lowest probed: " + lowest + ")";
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
  plan.feasible_rule = target_rate_per_s ? "meets " + plan.limits + " at a max rate of at least " +
                                               "the target " + number_text(*target_rate_per_s)
                                         : "meets " + plan.limits + " at some probed rate";
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
      e.tpot_p50_ms = p->tpot_p50_ms;
      e.output_tokens_per_s_per_user = tokens_per_s_per_user(p->tpot_p50_ms);
      if (p->verdict.num_decided > 0) e.slo_attainment = p->verdict.attainment;
    }
    if (!c.error.empty()) {
      e.infeasible_reason = "did not run";
    } else if (c.not_probed || c.diagnosis.infeasible()) {
      e.infeasible_reason = c.diagnosis.verdict();
    } else if (!c.search.found) {
      e.infeasible_reason = no_rate_reason(c);
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

namespace {

// The searches with seeds seed + 1 .. seed + replications - 1: their verdicts only (common random
// numbers within each seed).
std::vector<MultiplierSearch> search_more_seeds(
    const std::function<RateProbe(double, uint64_t, const std::atomic<bool>&)>& probe,
    uint64_t seed, const SearchOptions& options, int32_t probe_threads) {
  std::vector<MultiplierSearch> out;
  for (int32_t r = 1; r < options.replications; ++r) {
    const uint64_t rep_seed = seed + static_cast<uint64_t>(r);
    ProbeParallelism parallel;
    parallel.num_threads = probe_threads;
    out.push_back(search_max_multiplier(ProbeFunction([&](double m, const std::atomic<bool>& stop) {
                                          return probe(m, rep_seed, stop).verdict.meets;
                                        }),
                                        options.rel_tolerance, options.max_doublings, parallel));
  }
  return out;
}

}  // namespace

SearchResult search_rates(const ScenarioTemplate& scenario,
                          const std::vector<std::vector<Override>>& configs, const SearchSlo& slo,
                          const SearchOptions& options,
                          const std::function<void(int64_t, int64_t)>& progress) {
  MOESIM_CHECK(options.already_done.empty() || options.already_done.size() == configs.size(),
               "one already-done flag per configuration");
  SearchResult result;
  result.configs.resize(configs.size());
  auto searched = [&](int64_t i) {
    return i % options.shard_count == options.shard_index &&
           (options.already_done.empty() || !options.already_done[static_cast<size_t>(i)]);
  };
  // Threads: min(num_threads, configurations to search) search configurations at once, each
  // with num_threads / that threads for its probes (at least 1): never more than num_threads
  // simulations at a time.
  int64_t num_to_search = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(configs.size()); ++i) num_to_search += searched(i);
  const int32_t num_threads = std::max(1, options.num_threads);
  const int32_t probe_threads = std::max<int32_t>(
      1, num_threads / static_cast<int32_t>(std::clamp<int64_t>(num_to_search, 1, num_threads)));
  auto job = [&](int64_t i) -> ConfigSearch {
    ConfigSearch c;
    c.config_idx = i;
    c.overrides = configs[static_cast<size_t>(i)];
    if (!searched(i)) return c;
    try {
      Scenario base = scenario.instantiate(c.overrides);
      c.num_gpus = num_gpus(base);
      c.rate_unit = rate_unit(base);
      c.base_rate_per_s = base_rate_per_s(base);
      if (base.workload.kind == WorkloadKind::kMooncake ||
          base.workload.kind == WorkloadKind::kAzure) {
        c.trace_multiplier = trace_rate_multiplier(base.workload.trace);
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
      // Probes may run in parallel (speculatively): each is kept here until the search takes
      // it, in its order, into c.probes.
      std::mutex probes_mu;
      std::map<double, RateProbe> probed;
      auto probe = [&](double m, uint64_t probe_seed, const std::atomic<bool>& stop) {
        std::vector<Override> probe_overrides = c.overrides;
        probe_overrides.push_back(rate_override(base, m));
        Scenario sc = scenario.instantiate(probe_overrides);
        // The summary then counts SLO attainment with the search's limits (judge_run).
        sc.slo.ttft_ms = slo.request_ttft_ms.value_or(sc.slo.ttft_ms);
        sc.slo.tpot_ms = slo.request_tpot_ms.value_or(sc.slo.tpot_ms);
        // A probe that has not converged runs on, up to the factor (steady state: slo_verdict.h).
        if (!sc.run.max_duration_s && options.max_duration_factor > 1) {
          sc.run.max_duration_s = sc.run.duration_s * options.max_duration_factor;
        }
        RunOptions run_options;
        if (!options.full_probes) run_options.stop_on_certain_failure = watch_limits(sc, slo);
        run_options.cancel = &stop;  // a speculative probe the search has passed by
        RunOutput out = simulate(sc, probe_seed, run_options);
        RateProbe p;
        p.multiplier = m;
        p.rate_per_s = c.base_rate_per_s * m;
        p.verdict = judge_run(out, sc, slo);
        const RunSummary& s = out.summary;
        if (s.has.rates) {
          p.input_tokens_per_s = s.input_tokens_per_s;
          p.output_tokens_per_s = s.output_tokens_per_s;
        }
        if (s.ttft_ms.count + s.ttft_ms.num_censored > 0) p.ttft_p99_ms = s.ttft_ms.p99;
        if (s.tpot_ms.count + s.tpot_ms.num_censored > 0) p.tpot_p99_ms = s.tpot_ms.p99;
        if (s.tpot_ms.count > 0) p.tpot_p50_ms = s.tpot_ms.p50;
        return p;
      };
      auto meets = [&](double m, const std::atomic<bool>& stop) {
        RateProbe p = probe(m, seed, stop);
        const bool ok = p.verdict.meets;
        std::lock_guard<std::mutex> lock(probes_mu);
        probed.emplace(m, std::move(p));
        return ok;
      };
      ProbeParallelism parallel;
      parallel.num_threads = probe_threads;
      parallel.kept = [&](double m) {
        std::lock_guard<std::mutex> lock(probes_mu);
        auto it = probed.find(m);
        MOESIM_CHECK(it != probed.end(), "a kept probe was run");
        c.probes.push_back(std::move(it->second));
        probed.erase(it);
      };
      c.search = search_max_multiplier(ProbeFunction(meets), options.rel_tolerance,
                                       options.max_doublings, parallel);
      c.max_rate_per_s = c.base_rate_per_s * c.search.max_ok;
      c.fail_rate_per_s = c.base_rate_per_s * c.search.min_fail;
      c.replicates = search_more_seeds(probe, seed, options, probe_threads);
    } catch (const ConfigError& e) {
      c.error = e.what();
    }
    return c;
  };
  run_in_order<ConfigSearch>(
      static_cast<int64_t>(configs.size()), options.num_threads, job,
      [&](int64_t i, ConfigSearch& c) {
        if (searched(i) && options.on_searched) options.on_searched(c);
        result.configs[static_cast<size_t>(i)] = std::move(c);
      },
      progress);

  if (options.target_rate_per_s && options.shard_count == 1) {
    result.cheapest = cheapest_config(result.configs, *options.target_rate_per_s);
  }
  return result;
}

}  // namespace moesim::sim::study
