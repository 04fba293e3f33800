#include "sim/study/sweep.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <optional>
#include <set>

#include "base/check.h"
#include "sim/config/input_files.h"
#include "sim/metrics/figure_text.h"
#include "sim/policy/policy_registry.h"
#include "sim/study/csv.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/planner.h"
#include "sim/study/simulate.h"

namespace moesim::sim::study {
namespace {

std::string figure(double v, bool has = true) { return has ? number_text(v) : ""; }
// A policy metric: byte counts as integers.
std::string metric_text(const std::string& name, double v) {
  return is_bytes_name(name) ? count_text(v) : number_text(v);
}

// A message on one line, so that every CSV row is one line (sweep_merge reads lines).
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

const std::vector<std::string>& figure_columns() {
  static const std::vector<std::string> kColumns = {"status",
                                                    "num_gpus",
                                                    "num_arrived",
                                                    "num_completed",
                                                    "num_rejected",
                                                    "num_in_flight",
                                                    "num_waiting_first_token",
                                                    "converged",
                                                    "warmup_s",
                                                    "simulated_s",
                                                    "max_duration_factor",
                                                    "lower_bounds",
                                                    "max_wait_first_token_ms",
                                                    "ttft_p50_ms",
                                                    "ttft_p90_ms",
                                                    "ttft_p99_ms",
                                                    "tpot_p50_ms",
                                                    "tpot_p90_ms",
                                                    "tpot_p99_ms",
                                                    "e2e_p50_ms",
                                                    "e2e_p99_ms",
                                                    "queueing_p50_ms",
                                                    "queueing_p99_ms",
                                                    "input_tokens_per_s",
                                                    "output_tokens_per_s",
                                                    "requests_per_s",
                                                    "goodput_req_per_s",
                                                    "slo_attainment",
                                                    "num_slo_met",
                                                    "num_slo_decided",
                                                    "input_tokens_per_s_per_gpu",
                                                    "output_tokens_per_s_per_gpu",
                                                    "output_tokens_per_s_per_user",
                                                    "gpu_price_per_hour",
                                                    "gpu_price_source",
                                                    "gpu_hours_per_m_input_tokens",
                                                    "gpu_hours_per_m_output_tokens",
                                                    "usd_per_m_input_tokens",
                                                    "usd_per_m_output_tokens",
                                                    "feasible",
                                                    "feasible_limits",
                                                    "infeasible_reason",
                                                    "prefix_cache_hit_rate",
                                                    "compute_fraction",
                                                    "comm_fraction",
                                                    "wait_fraction",
                                                    "kv_high_water_fraction",
                                                    "expert_imbalance",
                                                    "expert_gpu_imbalance_mean",
                                                    "expert_gpu_balancedness",
                                                    "expert_slot_imbalance_mean",
                                                    "expert_slot_balancedness",
                                                    "num_preemptions",
                                                    "num_steps",
                                                    "actions",
                                                    "policy_metrics",
                                                    "digest",
                                                    "error"};
  return kColumns;
}

std::string optional_figure(std::optional<double> v) { return v ? number_text(*v) : ""; }

std::vector<std::string> figure_cells(const Scenario& sc, const RunOutput& out,
                                      const SweepPlanner& planner, double max_duration_factor) {
  const RunSummary& s = out.summary;
  const GpuPrice price = gpu_price(sc, planner.gpu_price_per_hour);
  const auto rate = [&](double v) { return s.has.rates ? std::optional<double>(v) : std::nullopt; };
  const CostFigures cost =
      cost_figures(num_gpus(sc), rate(s.input_tokens_per_s), rate(s.output_tokens_per_s), price);
  const SloVerdict verdict = judge_run(out, sc, planner.limits);
  std::string actions, metrics;
  for (const auto& [name, n] : s.counters.actions) {
    actions += (actions.empty() ? "" : ";") + name + "=" + std::to_string(n);
  }
  for (const auto& [name, v] : s.counters.policy_metrics) {
    metrics += (metrics.empty() ? "" : ";") + name + "=" + metric_text(name, v);
  }
  auto has = [](const Percentiles& p) { return p.count + p.num_censored > 0; };
  const bool ttft = has(s.ttft_ms), tpot = has(s.tpot_ms), e2e = has(s.e2e_ms),
             queueing = has(s.queueing_ms);
  // Percentiles that are only lower bounds (too many requests in flight at the end).
  std::string bounds;
  auto bound = [&bounds](const char* name, bool b) {
    if (b) bounds += (bounds.empty() ? "" : ";") + std::string(name);
  };
  bound("ttft_p50", s.ttft_ms.lower_bound.p50);
  bound("ttft_p90", s.ttft_ms.lower_bound.p90);
  bound("ttft_p99", s.ttft_ms.lower_bound.p99);
  bound("tpot_p50", s.tpot_ms.lower_bound.p50);
  bound("tpot_p90", s.tpot_ms.lower_bound.p90);
  bound("tpot_p99", s.tpot_ms.lower_bound.p99);
  bound("e2e_p50", s.e2e_ms.lower_bound.p50);
  bound("e2e_p99", s.e2e_ms.lower_bound.p99);
  bound("queueing_p50", s.queueing_ms.lower_bound.p50);
  bound("queueing_p99", s.queueing_ms.lower_bound.p99);
  const MeasurementSummary& m = s.measurement;
  const std::optional<double> per_user =
      tokens_per_s_per_user(tpot ? std::optional<double>(s.tpot_ms.p50) : std::nullopt);
  return {out.conservation_ok ? "ok" : "conservation_broken",
          std::to_string(num_gpus(sc)),
          std::to_string(s.num_arrived),
          std::to_string(s.num_completed),
          std::to_string(s.num_rejected),
          std::to_string(s.num_in_flight),
          std::to_string(s.num_waiting_first_token),
          m.analysed ? (m.converged ? "yes" : "no") : "",
          figure(m.warmup_s, m.analysed),
          number_text(m.extended_to_s > 0 ? m.extended_to_s : sc.run.duration_s),
          number_text(max_duration_factor),
          bounds,
          figure(s.max_wait_first_token_ms, s.has.max_wait_first_token),
          figure(s.ttft_ms.p50, ttft),
          figure(s.ttft_ms.p90, ttft),
          figure(s.ttft_ms.p99, ttft),
          figure(s.tpot_ms.p50, tpot),
          figure(s.tpot_ms.p90, tpot),
          figure(s.tpot_ms.p99, tpot),
          figure(s.e2e_ms.p50, e2e),
          figure(s.e2e_ms.p99, e2e),
          figure(s.queueing_ms.p50, queueing),
          figure(s.queueing_ms.p99, queueing),
          figure(s.input_tokens_per_s, s.has.rates),
          figure(s.output_tokens_per_s, s.has.rates),
          figure(s.requests_per_s, s.has.rates),
          figure(s.slo.goodput_req_per_s, s.has.rates),
          figure(s.slo.attainment, s.has.attainment),
          std::to_string(s.slo.num_met),
          std::to_string(s.slo.num_decided),
          optional_figure(cost.input_tokens_per_s_per_gpu),
          optional_figure(cost.output_tokens_per_s_per_gpu),
          optional_figure(per_user),
          optional_figure(price.usd_per_hour),
          price.source,
          optional_figure(cost.gpu_hours_per_m_input_tokens),
          optional_figure(cost.gpu_hours_per_m_output_tokens),
          optional_figure(cost.usd_per_m_input_tokens),
          optional_figure(cost.usd_per_m_output_tokens),
          verdict.meets ? "true" : "false",
          slo_limits_text(planner.limits),
          verdict.reason,
          figure(s.prefix_cache_hit_rate, s.has.prefix_cache),
          figure(s.compute_fraction, s.has.gpu_time),
          figure(s.comm_fraction, s.has.gpu_time),
          figure(s.wait_fraction, s.has.gpu_time),
          figure(s.kv_high_water_fraction, s.has.kv_pool),
          figure(s.expert_imbalance, s.has.expert_load),
          figure(s.expert_gpu_imbalance_mean, s.has.gpu_balance),
          figure(s.expert_gpu_balancedness, s.has.gpu_balance),
          figure(s.expert_slot_imbalance_mean, s.has.slot_balance),
          figure(s.expert_slot_balancedness, s.has.slot_balance),
          std::to_string(s.counters.num_preemptions),
          std::to_string(s.counters.num_steps),
          actions,
          metrics,
          out.digest_hex,
          out.conservation_ok ? "" : one_line(out.conservation_message)};
}

// A resumed row's planner cells must be what this sweep writes: the same feasible_limits, and a
// price from the flag exactly when the flag is given, at its value. Rows of runs that did not
// run (status error) have none.
void check_planner_cells(const std::string& path, int line, const std::string& row,
                         const std::vector<std::string>& header, const SweepPlanner& planner,
                         double max_duration_factor) {
  std::vector<std::string> cells;
  if (!split_csv_line(row, cells) || cells.size() != header.size()) {
    throw ConfigError(path, line, 0, "",
                      "not a row of this sweep (" + std::to_string(cells.size()) +
                          " cells, expected " + std::to_string(header.size()) + ")");
  }
  auto at = [&](const char* column) -> const std::string& {
    const auto it = std::find(header.begin(), header.end(), column);
    MOESIM_CHECK(it != header.end(), "sweep column missing");
    return cells[static_cast<size_t>(it - header.begin())];
  };
  if (at("status") == "error") return;
  if (at("max_duration_factor") != number_text(max_duration_factor)) {
    throw ConfigError(path, line, 0, "max_duration_factor",
                      "written with --max-duration-factor " + at("max_duration_factor") +
                          " where this sweep has " + number_text(max_duration_factor) +
                          " (give the killed sweep's)");
  }
  const std::string limits = slo_limits_text(planner.limits);
  if (at("feasible_limits") != limits) {
    throw ConfigError(path, line, 0, "feasible_limits",
                      "written with the limits '" + at("feasible_limits") +
                          "' where this sweep has '" + limits +
                          "' (give the killed sweep's --slo / --min-attainment)");
  }
  const bool from_flag = at("gpu_price_source") == "flag";
  if (from_flag != planner.gpu_price_per_hour.has_value() ||
      (from_flag && at("gpu_price_per_hour") != number_text(*planner.gpu_price_per_hour))) {
    throw ConfigError(path, line, 0, "gpu_price_per_hour",
                      "written with another --gpu-price-per-hour than this sweep's (give the "
                      "killed sweep's)");
  }
}

}  // namespace

std::string sweep_csv_header(const SweepSpec& spec) {
  std::vector<std::string> cells = {"run_idx", "num_runs", "config_idx", "seed"};
  for (const SweepParameter& p : spec.parameters) cells.push_back(p.key_path);
  for (const std::string& c : figure_columns()) cells.push_back(c);
  return csv_line(cells);
}

SweepStats run_sweep(const SweepSpec& spec, const ScenarioTemplate& scenario,
                     const SweepOptions& options, std::ostream& csv,
                     const std::function<void(int64_t, int64_t)>& progress) {
  MOESIM_CHECK(!options.planner.limits.request_ttft_ms && !options.planner.limits.request_tpot_ms,
               "a sweep's per-request limits are each configuration's [slo]");
  const std::vector<std::vector<Override>> configs = grid_configs(spec);
  const int64_t per_config = runs_per_config(spec);
  const int64_t total = num_sweep_runs(spec);
  MOESIM_CHECK(total == static_cast<int64_t>(configs.size()) * per_config, "grid size");
  std::vector<int64_t> runs;
  for (int64_t r = 0; r < total; ++r) {
    if (options.shard.contains(r)) runs.push_back(r);
  }
  MOESIM_CHECK(options.num_done >= 0 && options.num_done <= static_cast<int64_t>(runs.size()),
               "resumed rows within the shard");
  runs.erase(runs.begin(), runs.begin() + options.num_done);

  struct Row {
    std::string line;
    std::string status;
  };
  auto job = [&](int64_t i) -> Row {
    const int64_t run_idx = runs[static_cast<size_t>(i)];
    const int64_t config_idx = run_idx / per_config;
    const int64_t rep_idx = run_idx % per_config;
    const std::vector<Override>& config = configs[static_cast<size_t>(config_idx)];
    std::vector<std::string> cells = {std::to_string(run_idx), std::to_string(total),
                                      std::to_string(config_idx)};
    std::string seed_cell;
    if (!spec.seeds.empty()) seed_cell = std::to_string(spec.seeds[static_cast<size_t>(rep_idx)]);
    std::vector<std::string> figures;
    try {
      Scenario sc = scenario.instantiate(config);
      uint64_t seed = spec.seeds.empty() ? sc.run.seed + static_cast<uint64_t>(rep_idx)
                                         : spec.seeds[static_cast<size_t>(rep_idx)];
      seed_cell = std::to_string(seed);
      // A cell that has not converged runs on, up to the factor (steady state: slo_verdict.h).
      if (!sc.run.max_duration_s && options.max_duration_factor > 1) {
        sc.run.max_duration_s = sc.run.duration_s * options.max_duration_factor;
      }
      RunOutput out = simulate(sc, seed);
      figures = figure_cells(sc, out, options.planner, options.max_duration_factor);
    } catch (const ConfigError& e) {
      figures.assign(figure_columns().size(), "");
      figures.front() = "error";
      figures.back() = one_line(e.what());
    }
    cells.push_back(seed_cell);
    for (const Override& o : config) cells.push_back(override_value_text(o.value));
    Row row{csv_line(cells) + "," + csv_line(figures), figures.front()};
    return row;
  };

  SweepStats stats;
  if (options.num_done == 0) {
    csv << sweep_csv_header(spec) << "\n";
    csv.flush();
  }
  run_in_order<Row>(
      static_cast<int64_t>(runs.size()), options.num_threads, job,
      [&](int64_t, Row& row) {
        csv << row.line << "\n";
        csv.flush();
        ++stats.num_runs;
        if (row.status == "error") ++stats.num_errors;
        if (row.status == "conservation_broken") ++stats.num_broken;
      },
      progress);
  return stats;
}

ResumePoint find_resume_point(const std::string& path, const SweepSpec& spec, const Shard& shard,
                              const SweepPlanner& planner, double max_duration_factor) {
  ResumePoint point;
  InputFile in(path, InputKind::kData);
  if (!in.ok() && in.problem()->missing) return point;
  const std::optional<std::string> read = in.ok() ? in.read_all() : std::nullopt;
  if (!read) throw_input_problem(path, *in.problem(), "");
  const std::string& text = *read;
  const std::string header = sweep_csv_header(spec) + "\n";
  if (text.size() < header.size()) {
    // A kill before the header was complete: nothing to keep, if it is this sweep's beginning.
    if (header.compare(0, text.size(), text) != 0) {
      throw ConfigError(path, 1, 0, "", "not the CSV of this sweep (its header differs)");
    }
    return point;
  }
  if (text.compare(0, header.size(), header) != 0) {
    throw ConfigError(path, 1, 0, "", "not the CSV of this sweep (its header differs)");
  }
  std::vector<std::string> header_cells;
  split_csv_line(sweep_csv_header(spec), header_cells);
  size_t at = header.size();
  int64_t expected = shard.index - 1;  // the shard's runs in order
  int line = 1;
  const int64_t total = num_sweep_runs(spec);
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) break;  // cut short by the kill
    ++line;
    const size_t comma = text.find(',', at);
    const std::string cell =
        text.substr(at, comma == std::string::npos || comma > end ? end - at : comma - at);
    if (cell != std::to_string(expected) || expected >= total) {
      throw ConfigError(path, line, 0, "run_idx",
                        "expected run " + std::to_string(expected) +
                            " of this sweep's shard here (the file belongs to another sweep)");
    }
    check_planner_cells(path, line, text.substr(at, end - at), header_cells, planner,
                        max_duration_factor);
    ++point.num_done;
    expected += shard.count;
    at = end + 1;
  }
  // Without a row the header is written again.
  point.keep_bytes = point.num_done > 0 ? static_cast<int64_t>(at) : 0;
  return point;
}

}  // namespace moesim::sim::study
