#include "sim/study/search.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <system_error>
#include <thread>

#include "base/check.h"
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

namespace {

// The search's decisions, one probe at a time: next() is the multiplier to probe (none: done),
// record() takes its verdict. The one place of the bracketing and bisection rules; a value
// type, so speculation can copy it and play out verdicts it does not have yet.
class SearchState {
 public:
  SearchState(double rel_tolerance, int32_t max_doublings)
      : rel_tolerance_(rel_tolerance), max_doublings_(max_doublings) {}

  std::optional<double> next() const {
    switch (phase_) {
      case Phase::kFirst:
        return 1.0;
      case Phase::kUp:
        return lo_ * 2.0;
      case Phase::kDown:
        return hi_ / 2.0;
      case Phase::kBisect:
        return std::sqrt(lo_ * hi_);
      case Phase::kDone:
        break;
    }
    return std::nullopt;
  }

  void record(bool meets) {
    const double m = *next();
    ++num_probes_;
    switch (phase_) {
      case Phase::kFirst:
        (meets ? lo_ : hi_) = m;
        if (max_doublings_ > 0) {
          phase_ = meets ? Phase::kUp : Phase::kDown;
        } else {
          bracketed();
        }
        break;
      case Phase::kUp:
        ++num_doublings_;
        if (meets) {
          lo_ = m;
          if (num_doublings_ == max_doublings_) bracketed();
        } else {
          hi_ = m;
          bracketed();
        }
        break;
      case Phase::kDown:
        ++num_doublings_;
        if (meets) {
          lo_ = m;
          bracketed();
        } else {
          hi_ = m;
          if (num_doublings_ == max_doublings_) bracketed();
        }
        break;
      case Phase::kBisect:
        (meets ? lo_ : hi_) = m;
        bracketed();
        break;
      case Phase::kDone:
        MOESIM_CHECK(false, "a verdict after the search ended");
    }
  }

  // Whether a later probe of the search can be at m: every one lies above the highest meeting
  // multiplier and below the lowest failing one (doubling, halving and bisection alike), and
  // those bounds only tighten.
  bool may_need(double m) const {
    return phase_ != Phase::kDone && !(lo_ > 0 && m <= lo_) && !(hi_ > 0 && m >= hi_);
  }

  MultiplierSearch result() const {
    MultiplierSearch s;
    s.found = lo_ > 0;
    s.max_ok = lo_;
    s.min_fail = hi_;
    s.num_probes = num_probes_;
    return s;
  }

 private:
  enum class Phase { kFirst, kUp, kDown, kBisect, kDone };
  // The bracket is set (or bracketing gave up): bisect it down to the tolerance.
  void bracketed() {
    phase_ = lo_ > 0 && hi_ > 0 && hi_ / lo_ > 1.0 + rel_tolerance_ ? Phase::kBisect : Phase::kDone;
  }

  double rel_tolerance_;
  int32_t max_doublings_;
  Phase phase_ = Phase::kFirst;
  int32_t num_doublings_ = 0;  // doubling (halving) probes so far
  double lo_ = 0, hi_ = 0;     // highest meeting, lowest failing (0: none yet)
  int32_t num_probes_ = 0;
};

// A speculative search: each thread takes the probe the search is most likely to need next
// (pick) that is neither done nor running, and the search walks its decisions over the verdicts
// as they come in (walk). A running probe the search can no longer need is told to stop.
class Speculation {
 public:
  Speculation(const ProbeFunction& meets, SearchState state, const ProbeParallelism& parallel)
      : meets_(meets), state_(state), parallel_(parallel) {}

  MultiplierSearch run() {
    std::vector<std::thread> helpers;
    for (int32_t t = 1; t < parallel_.num_threads; ++t) {
      try {
        helpers.emplace_back([this] { work(); });
      } catch (const std::system_error&) {
        break;  // no more threads to be had: fewer probes at a time, the same result
      }
    }
    work();
    for (std::thread& t : helpers) t.join();
    if (parallel_.num_evaluated) *parallel_.num_evaluated = num_evaluated_;
    if (parallel_.num_stopped) *parallel_.num_stopped = num_stopped_;
    if (error_) std::rethrow_exception(error_);
    return state_.result();
  }

 private:
  struct Verdict {
    bool meets = false;
    std::exception_ptr error;
  };

  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      std::optional<double> m = pick();
      if (!m) {
        cv_.wait(lock);
        continue;
      }
      const std::atomic<bool>& stop =
          *running_.emplace(*m, std::make_unique<std::atomic<bool>>(false)).first->second;
      ++num_evaluated_;
      lock.unlock();
      Verdict v;
      try {
        v.meets = meets_(*m, stop);
      } catch (...) {
        v.error = std::current_exception();
      }
      lock.lock();
      running_.erase(*m);
      verdicts_.emplace(*m, v);
      walk();
      stop_unneeded();
      cv_.notify_all();
    }
  }

  // Tells the running probes the search can no longer need to stop.
  void stop_unneeded() {
    for (auto& [m, stop] : running_) {
      if ((done_ || !state_.may_need(m)) && !stop->load(std::memory_order_relaxed)) {
        stop->store(true, std::memory_order_relaxed);
        ++num_stopped_;
      }
    }
  }

  // Takes the verdicts the search needs next, in its order, as far as they are in.
  void walk() {
    while (!done_) {
      std::optional<double> m = state_.next();
      if (!m) {
        done_ = true;
        break;
      }
      auto it = verdicts_.find(*m);
      if (it == verdicts_.end()) break;
      if (it->second.error) {
        error_ = it->second.error;
        done_ = true;
        break;
      }
      try {
        if (parallel_.kept) parallel_.kept(*m);
      } catch (...) {
        error_ = std::current_exception();
        done_ = true;
        break;
      }
      state_.record(it->second.meets);
    }
  }

  // The multiplier the search is most likely to need next that is neither probed nor running;
  // none when every multiplier the search can still need is. Every verdict not in yet counts as
  // even odds, so the most likely is the one fewest such verdicts away (breadth first over the
  // decisions from here, through the verdicts already in); ties: the one found first, taking the
  // meeting branch before the failing one (the next doubling before a bisection, a bisection
  // before the next halving, the upper half of a bracket before the lower).
  std::optional<double> pick() const {
    struct Node {
      int32_t depth;  // verdicts not in yet on the way here
      int64_t order;
      SearchState state;
    };
    auto later = [](const Node& a, const Node& b) {
      return a.depth > b.depth || (a.depth == b.depth && a.order > b.order);
    };
    std::priority_queue<Node, std::vector<Node>, decltype(later)> queue(later);
    int64_t order = 0;
    queue.push({0, order++, state_});
    while (!queue.empty()) {
      Node n = queue.top();
      queue.pop();
      std::optional<double> m = n.state.next();
      if (!m) continue;
      auto it = verdicts_.find(*m);
      if (it == verdicts_.end() && !running_.count(*m)) return m;
      if (it != verdicts_.end()) {
        if (it->second.error) continue;  // the search would stop there
        Node child = n;
        child.order = order++;
        child.state.record(it->second.meets);
        queue.push(child);
        continue;
      }
      for (bool meets : {true, false}) {
        Node child = n;
        ++child.depth;
        child.order = order++;
        child.state.record(meets);
        queue.push(child);
      }
    }
    return std::nullopt;
  }

  const ProbeFunction& meets_;
  SearchState state_;
  const ProbeParallelism& parallel_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<double, Verdict> verdicts_;
  std::map<double, std::unique_ptr<std::atomic<bool>>> running_;  // with their stop flags
  bool done_ = false;
  std::exception_ptr error_;
  int32_t num_evaluated_ = 0;
  int32_t num_stopped_ = 0;
};

}  // namespace

MultiplierSearch search_max_multiplier(const ProbeFunction& meets, double rel_tolerance,
                                       int32_t max_doublings, const ProbeParallelism& parallel) {
  MOESIM_CHECK(rel_tolerance > 0 && max_doublings >= 0 && parallel.num_threads >= 1,
               "search options");
  SearchState state(rel_tolerance, max_doublings);
  if (parallel.num_threads > 1) return Speculation(meets, state, parallel).run();
  const std::atomic<bool> never(false);
  while (std::optional<double> m = state.next()) {
    const bool ok = meets(*m, never);
    if (parallel.kept) parallel.kept(*m);
    state.record(ok);
  }
  if (parallel.num_evaluated) *parallel.num_evaluated = state.result().num_probes;
  if (parallel.num_stopped) *parallel.num_stopped = 0;
  return state.result();
}

MultiplierSearch search_max_multiplier(const std::function<bool(double)>& meets,
                                       double rel_tolerance, int32_t max_doublings,
                                       const ProbeParallelism& parallel) {
  const ProbeFunction probe = [&meets](double m, const std::atomic<bool>&) { return meets(m); };
  return search_max_multiplier(probe, rel_tolerance, max_doublings, parallel);
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
      // Probes may run in parallel (speculatively): each is kept here until the search takes
      // it, in its order, into c.probes.
      std::mutex probes_mu;
      std::map<double, RateProbe> probed;
      auto meets = [&](double m, const std::atomic<bool>& stop) {
        std::vector<Override> probe_overrides = c.overrides;
        probe_overrides.push_back(rate_override(base, m));
        Scenario sc = scenario.instantiate(probe_overrides);
        // The summary then counts SLO attainment with the search's limits (judge_run).
        sc.slo.ttft_ms = slo.request_ttft_ms.value_or(sc.slo.ttft_ms);
        sc.slo.tpot_ms = slo.request_tpot_ms.value_or(sc.slo.tpot_ms);
        RunOptions run_options;
        if (!options.full_probes) run_options.stop_on_certain_failure = watch_limits(sc, slo);
        run_options.cancel = &stop;  // a speculative probe the search has passed by
        RunOutput out = simulate(sc, seed, run_options);
        RateProbe p;
        p.multiplier = m;
        p.rate_per_s = c.base_rate_per_s * m;
        p.verdict = judge_run(out, sc, slo);
        const RunSummary& s = out.summary;
        if (s.has.rates) {
          p.input_tokens_per_s = s.input_tokens_per_s;
          p.output_tokens_per_s = s.output_tokens_per_s;
        }
        if (s.ttft_ms.count > 0) p.ttft_p99_ms = s.ttft_ms.p99;
        if (s.tpot_ms.count > 0) p.tpot_p99_ms = s.tpot_ms.p99;
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
