#include "sim/study/sweep.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "base/check.h"
#include "sim/metrics/figure_text.h"
#include "sim/policy/policy_registry.h"
#include "sim/study/csv.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/planner.h"
#include "sim/study/simulate.h"

namespace moesim::sim::study {
namespace {

int32_t line_of(const toml::node* n) {
  return n ? static_cast<int32_t>(n->source().begin.line) : 0;
}
int32_t column_of(const toml::node* n) {
  return n ? static_cast<int32_t>(n->source().begin.column) : 0;
}

[[noreturn]] void fail_at(const std::string& file, const toml::node* n, const std::string& key,
                          const std::string& reason) {
  throw ConfigError(file, line_of(n), column_of(n), key, reason);
}

// Rejects keys of `table` outside `allowed`, suggesting the nearest allowed key.
void check_keys(const std::string& file, const toml::table& table, const std::string& prefix,
                const std::vector<std::string>& allowed) {
  for (const auto& entry : table) {
    const toml::key& k = entry.first;
    std::string key(k.str());
    bool known = false;
    std::string best;
    int best_distance = 1 << 30;
    for (const std::string& a : allowed) {
      if (a == key) known = true;
      int d = edit_distance(a, key);
      if (d < best_distance) best_distance = d, best = a;
    }
    if (known) continue;
    std::string reason = "unknown key '" + key + "'";
    if (best_distance <= 3) reason += " (did you mean '" + best + "'?)";
    throw ConfigError(file, static_cast<int>(k.source().begin.line),
                      static_cast<int>(k.source().begin.column), prefix + key, reason);
  }
}

OverrideValue scalar_value(const std::string& file, const toml::node& n, const std::string& key,
                           bool as_double) {
  if (n.is_integer()) {
    int64_t v = n.as_integer()->get();
    if (as_double) return static_cast<double>(v);
    return v;
  }
  if (n.is_floating_point()) return n.as_floating_point()->get();
  if (n.is_boolean()) return n.as_boolean()->get();
  if (n.is_string()) {
    std::string s = n.as_string()->get();
    if (s.find_first_of("\r\n") != std::string::npos) {
      fail_at(file, &n, key, "string values may not contain line breaks");
    }
    return s;
  }
  fail_at(file, &n, key, "values must be integers, floats, booleans or strings");
}

SweepParameter parse_parameter(const std::string& file, const toml::table& t,
                               const std::string& prefix) {
  check_keys(file, t, prefix, {"key", "values"});
  SweepParameter p;
  const toml::node* key = t.get("key");
  if (!key) fail_at(file, &t, prefix + "key", "missing required key (string)");
  if (!key->is_string()) fail_at(file, key, prefix + "key", "expected a string");
  p.key_path = key->as_string()->get();
  p.line = line_of(key);
  if (p.key_path.empty() || p.key_path.front() == '.' || p.key_path.back() == '.' ||
      p.key_path.find("..") != std::string::npos) {
    fail_at(file, key, prefix + "key", "'" + p.key_path + "' is not a dotted key path");
  }
  const toml::node* values = t.get("values");
  if (!values) fail_at(file, &t, prefix + "values", "missing required key (array)");
  const toml::array* arr = values->as_array();
  if (!arr || arr->empty()) fail_at(file, values, prefix + "values", "expected a non-empty array");
  bool any_float = false, any_int = false;
  std::optional<toml::node_type> type;
  for (const toml::node& v : *arr) {
    toml::node_type ty = v.type();
    any_float |= ty == toml::node_type::floating_point;
    any_int |= ty == toml::node_type::integer;
    bool numeric = ty == toml::node_type::floating_point || ty == toml::node_type::integer;
    bool type_numeric =
        type && (*type == toml::node_type::floating_point || *type == toml::node_type::integer);
    if (type && ty != *type && !(numeric && type_numeric)) {
      fail_at(file, &v, prefix + "values", "all values must have one type");
    }
    type = ty;
  }
  bool as_double = any_float && any_int;
  for (const toml::node& v : *arr) {
    p.values.push_back(scalar_value(file, v, prefix + "values", as_double));
    p.value_lines.push_back(line_of(&v));
  }
  return p;
}

// True when one dotted path is a segment-wise prefix of the other (or they are equal).
bool related_paths(const std::string& a, const std::string& b) {
  const std::string& shorter = a.size() <= b.size() ? a : b;
  const std::string& longer = a.size() <= b.size() ? b : a;
  if (longer.compare(0, shorter.size(), shorter) != 0) return false;
  return longer.size() == shorter.size() || longer[shorter.size()] == '.';
}

// Schema errors (an unknown key, policy or enum value; a value of the wrong type) hold for every
// configuration, whatever the other parameters' values.
bool is_schema_error(const ConfigError& e) {
  return e.reason().rfind("unknown ", 0) == 0 || e.reason().rfind("expected ", 0) == 0;
}

// A figure cell (sim/metrics/figure_text.h): 15 significant digits, shortest form; empty where
// the figure has no data.
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
                                      const SweepPlanner& planner) {
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
  const bool ttft = s.ttft_ms.count > 0, tpot = s.tpot_ms.count > 0, e2e = s.e2e_ms.count > 0,
             queueing = s.queueing_ms.count > 0;
  return {out.conservation_ok ? "ok" : "conservation_broken",
          std::to_string(num_gpus(sc)),
          std::to_string(s.num_arrived),
          std::to_string(s.num_completed),
          std::to_string(s.num_rejected),
          std::to_string(s.num_in_flight),
          std::to_string(s.num_waiting_first_token),
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
                         const std::vector<std::string>& header, const SweepPlanner& planner) {
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

SweepSpec load_sweep(const std::string& path, const std::optional<std::string>& scenario_path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, 0, 0, "", "cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  toml::table root;
  try {
    root = toml::parse(text.str(), path);
  } catch (const toml::parse_error& e) {
    throw ConfigError(path, static_cast<int>(e.source().begin.line),
                      static_cast<int>(e.source().begin.column), "",
                      "TOML syntax error: " + std::string(e.description()));
  }
  check_keys(path, root, "", {"scenario", "description", "seeds", "replications", "parameters"});

  SweepSpec spec;
  spec.file = path;
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  if (scenario_path) {
    spec.scenario_path = *scenario_path;
  } else {
    const toml::node* sc = root.get("scenario");
    if (!sc) fail_at(path, &root, "scenario", "missing required key (string)");
    if (!sc->is_string()) fail_at(path, sc, "scenario", "expected a string");
    std::filesystem::path p(sc->as_string()->get());
    spec.scenario_path =
        (p.is_absolute() ? p : std::filesystem::path(base_dir) / p).lexically_normal().string();
  }
  if (const toml::node* d = root.get("description"); d && !d->is_string()) {
    fail_at(path, d, "description", "expected a string");
  }

  const toml::node* seeds = root.get("seeds");
  const toml::node* reps = root.get("replications");
  if (seeds && reps) fail_at(path, reps, "replications", "give either seeds or replications");
  if (seeds) {
    const toml::array* arr = seeds->as_array();
    if (!arr || arr->empty()) fail_at(path, seeds, "seeds", "expected a non-empty array");
    std::set<uint64_t> seen;
    for (const toml::node& s : *arr) {
      if (!s.is_integer() || s.as_integer()->get() < 0) {
        fail_at(path, &s, "seeds", "seeds must be integers >= 0");
      }
      uint64_t v = static_cast<uint64_t>(s.as_integer()->get());
      if (!seen.insert(v).second) fail_at(path, &s, "seeds", "seed listed twice");
      spec.seeds.push_back(v);
    }
  }
  if (reps) {
    if (!reps->is_integer() || reps->as_integer()->get() < 1 ||
        reps->as_integer()->get() > 1000000) {
      fail_at(path, reps, "replications", "expected an integer in [1, 1000000]");
    }
    spec.num_replications = static_cast<int32_t>(reps->as_integer()->get());
  }

  if (const toml::node* params = root.get("parameters")) {
    const toml::array* arr = params->as_array();
    if (!arr || !arr->is_array_of_tables()) {
      fail_at(path, params, "parameters", "expected an array of tables ([[parameters]])");
    }
    for (size_t i = 0; i < arr->size(); ++i) {
      std::string prefix = "parameters[" + std::to_string(i) + "].";
      SweepParameter p = parse_parameter(path, *arr->get(i)->as_table(), prefix);
      for (const SweepParameter& q : spec.parameters) {
        if (q.key_path == p.key_path) {
          fail_at(path, arr->get(i)->as_table()->get("key"), prefix + "key",
                  "parameter '" + p.key_path + "' given twice");
        }
      }
      spec.parameters.push_back(std::move(p));
    }
  }
  return spec;
}

void check_sweep(const SweepSpec& spec, const ScenarioTemplate& scenario) {
  make_policies(scenario.instantiate({}));
  for (size_t i = 0; i < spec.parameters.size(); ++i) {
    const SweepParameter& p = spec.parameters[i];
    for (size_t j = 0; j < p.values.size(); ++j) {
      Override o{p.key_path, p.values[j]};
      try {
        make_policies(scenario.instantiate(std::span<const Override>(&o, 1)));
      } catch (const ConfigError& e) {
        if (!is_schema_error(e) || !related_paths(e.key_path(), p.key_path)) continue;
        throw ConfigError(spec.file, p.value_lines[j], 0, "parameters[" + std::to_string(i) + "]",
                          "'" + p.key_path + "' = " + override_value_text(p.values[j]) + ": " +
                              e.key_path() + ": " + e.reason() + " (in " + scenario.path() + ")");
      }
    }
  }
}

std::vector<std::vector<Override>> grid_configs(const SweepSpec& spec) {
  std::vector<std::vector<Override>> configs(1);
  for (const SweepParameter& p : spec.parameters) {
    std::vector<std::vector<Override>> next;
    next.reserve(configs.size() * p.values.size());
    for (const std::vector<Override>& c : configs) {
      for (const OverrideValue& v : p.values) {
        next.push_back(c);
        next.back().push_back(Override{p.key_path, v});
      }
    }
    configs = std::move(next);
  }
  return configs;
}

int64_t runs_per_config(const SweepSpec& spec) {
  return spec.seeds.empty() ? spec.num_replications : static_cast<int64_t>(spec.seeds.size());
}

int64_t num_sweep_runs(const SweepSpec& spec) {
  int64_t configs = 1;
  for (const SweepParameter& p : spec.parameters) configs *= static_cast<int64_t>(p.values.size());
  return configs * runs_per_config(spec);
}

Shard parse_shard(const std::string& text) {
  auto slash = text.find('/');
  auto bad = [&](const std::string& why) -> ConfigError {
    return ConfigError("--shard", 0, 0, "", "'" + text + "': " + why);
  };
  if (slash == std::string::npos) throw bad("expected K/N");
  auto parse = [&](const std::string& s) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      throw bad("expected K/N with positive integers");
    }
    return static_cast<int32_t>(std::stol(s));
  };
  Shard shard{parse(text.substr(0, slash)), parse(text.substr(slash + 1))};
  if (shard.count < 1 || shard.index < 1 || shard.index > shard.count) {
    throw bad("need 1 <= K <= N");
  }
  return shard;
}

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
      RunOutput out = simulate(sc, seed);
      figures = figure_cells(sc, out, options.planner);
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
                              const SweepPlanner& planner) {
  ResumePoint point;
  std::ifstream in(path, std::ios::binary);
  if (!in) return point;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
    check_planner_cells(path, line, text.substr(at, end - at), header_cells, planner);
    ++point.num_done;
    expected += shard.count;
    at = end + 1;
  }
  // Without a row the header is written again.
  point.keep_bytes = point.num_done > 0 ? static_cast<int64_t>(at) : 0;
  return point;
}

}  // namespace moesim::sim::study
