#include "sim/study/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/core/check.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/simulate.h"

namespace moesim::sim::study {
namespace {

const std::vector<std::string>& percentile_limit_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const char* metric : {"ttft", "tpot", "e2e", "queueing"}) {
      for (const char* p : {"p50", "p90", "p99"}) {
        names.push_back(std::string(metric) + "_" + p + "_ms");
      }
    }
    return names;
  }();
  return kNames;
}

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

SearchSlo parse_search_slo(const std::string& text) {
  SearchSlo slo;
  auto bad = [&](const std::string& item, const std::string& why) -> ConfigError {
    return ConfigError("--slo", 0, 0, item, why);
  };
  std::string valid = "ttft_ms, tpot_ms, attainment";
  for (const std::string& n : percentile_limit_names()) valid += ", " + n;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) throw bad("", "empty item in '" + text + "' (want NAME=VALUE,...)");
    size_t eq = item.find('=');
    if (eq == std::string::npos) throw bad(item, "want NAME=VALUE");
    std::string name = item.substr(0, eq), value_text = item.substr(eq + 1);
    char* end = nullptr;
    double value = std::strtod(value_text.c_str(), &end);
    if (value_text.empty() || *end != '\0' || !std::isfinite(value)) {
      throw bad(name, "not a number: '" + value_text + "'");
    }
    if (name == "attainment") {
      if (value < 0 || value > 1) throw bad(name, "must be in [0, 1]");
      slo.min_attainment = value;
      continue;
    }
    if (value <= 0) throw bad(name, "must be > 0");
    if (name == "ttft_ms") {
      slo.request_ttft_ms = value;
    } else if (name == "tpot_ms") {
      slo.request_tpot_ms = value;
    } else if (std::find(percentile_limit_names().begin(), percentile_limit_names().end(), name) !=
               percentile_limit_names().end()) {
      for (const SearchSlo::Limit& l : slo.percentile_limits) {
        if (l.name == name) throw bad(name, "given twice");
      }
      slo.percentile_limits.push_back({name, value});
    } else {
      throw bad(name, "unknown limit (valid: " + valid + ")");
    }
  }
  return slo;
}

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
    if (!c.error.empty() || !c.search.found || c.max_rate_per_s < target_rate_per_s) continue;
    if (!best || c.num_gpus < configs[*best].num_gpus ||
        (c.num_gpus == configs[*best].num_gpus &&
         c.max_rate_per_s > configs[*best].max_rate_per_s)) {
      best = i;
    }
  }
  return best;
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
      const uint64_t seed = options.seed.value_or(base.run.seed);
      auto meets = [&](double m) {
        std::vector<Override> probe_overrides = c.overrides;
        probe_overrides.push_back(rate_override(base, m));
        Scenario sc = scenario.instantiate(probe_overrides);
        // The summary then counts SLO attainment with the search's limits (judge_run).
        sc.slo.ttft_ms = slo.request_ttft_ms.value_or(sc.slo.ttft_ms);
        sc.slo.tpot_ms = slo.request_tpot_ms.value_or(sc.slo.tpot_ms);
        RunOutput out = simulate(sc, seed);
        RateProbe p{m, c.base_rate_per_s * m, judge_run(out, sc, slo)};
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
