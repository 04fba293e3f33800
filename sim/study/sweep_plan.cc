#include "sim/study/sweep_plan.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/study/csv.h"

namespace moesim::sim::study {
namespace {

// Sums of one configuration's rows.
struct ConfigRows {
  PlanEntry entry;
  int64_t num_rows = 0;
  bool all_feasible = true;
  double sum_input = 0, sum_output = 0, sum_rate = 0, sum_ttft = 0, sum_tpot = 0, sum_tpot50 = 0;
  std::vector<double> outputs, ttfts;  // per run, for the intervals
  int64_t n_rates = 0, n_ttft = 0, n_tpot = 0, n_tpot50 = 0;
  int64_t num_met = 0, num_decided = 0;
  std::string first_error;
};

std::optional<double> mean(double sum, int64_t n) {
  if (n == 0) return std::nullopt;
  return sum / static_cast<double>(n);
}

// Student-t 95% half-width of the mean of `v`; absent with fewer than two values.
std::optional<double> half_width(const std::vector<double>& v) {
  if (v.size() < 2) return std::nullopt;
  const auto n = static_cast<double>(v.size());
  double m = 0;
  for (double x : v) m += x;
  m /= n;
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  const boost::math::students_t t_dist(n - 1);
  return boost::math::quantile(boost::math::complement(t_dist, 0.025)) * std::sqrt(ss / (n - 1)) /
         std::sqrt(n);
}

// A configuration's entry from its rows: means over its ok runs, their intervals, the cost.
PlanEntry finish_entry(ConfigRows& r) {
  PlanEntry e = std::move(r.entry);
  if (e.num_runs == 0) {
    e.error = r.first_error;
  } else {
    e.input_tokens_per_s = mean(r.sum_input, r.n_rates);
    e.output_tokens_per_s = mean(r.sum_output, r.n_rates);
    e.rate_per_s = mean(r.sum_rate, r.n_rates);
    e.ttft_p99_ms = mean(r.sum_ttft, r.n_ttft);
    e.tpot_p99_ms = mean(r.sum_tpot, r.n_tpot);
    e.tpot_p50_ms = mean(r.sum_tpot50, r.n_tpot50);
    e.output_tokens_per_s_half_width = half_width(r.outputs);
    e.ttft_p99_ms_half_width = half_width(r.ttfts);
    e.output_tokens_per_s_per_user = tokens_per_s_per_user(e.tpot_p50_ms);
    if (r.num_decided > 0) {
      e.slo_attainment = static_cast<double>(r.num_met) / static_cast<double>(r.num_decided);
    }
    e.feasible = r.all_feasible;
    e.cost = cost_figures(e.num_gpus, e.input_tokens_per_s, e.output_tokens_per_s, e.price);
  }
  return e;
}

}  // namespace

Plan plan_from_sweep_csv(std::istream& csv, const std::string& name) {
  std::string line;
  std::vector<std::string> header;
  if (!std::getline(csv, line) || !split_csv_line(line, header) || header.size() < 4 ||
      header[0] != "run_idx") {
    throw ConfigError(name, 1, 0, "", "not a sweep CSV (header must start run_idx,num_runs)");
  }
  auto column = [&](const std::string& c) -> size_t {
    const auto it = std::find(header.begin(), header.end(), c);
    if (it == header.end()) {
      throw ConfigError(name, 1, 0, c, "not a sweep CSV of this moesim (no column '" + c + "')");
    }
    return static_cast<size_t>(it - header.begin());
  };
  const size_t c_config = column("config_idx"), c_seed = column("seed"),
               c_status = column("status");
  const size_t c_gpus = column("num_gpus"), c_in = column("input_tokens_per_s"),
               c_out = column("output_tokens_per_s"), c_rate = column("requests_per_s"),
               c_ttft = column("ttft_p99_ms"), c_tpot = column("tpot_p99_ms"),
               c_tpot50 = column("tpot_p50_ms"), c_met = column("num_slo_met"),
               c_decided = column("num_slo_decided"), c_price = column("gpu_price_per_hour"),
               c_source = column("gpu_price_source"), c_feasible = column("feasible"),
               c_limits = column("feasible_limits"), c_reason = column("infeasible_reason"),
               c_error = column("error");
  Plan plan;
  plan.command = "sweep";
  plan.cheapest_rule = "lowest cost per million output tokens";
  for (size_t k = c_seed + 1; k < c_status; ++k) plan.parameter_keys.push_back(header[k]);

  std::map<int64_t, ConfigRows> configs;
  std::optional<std::string> limits;
  int line_no = 1;
  std::vector<std::string> cells;
  while (std::getline(csv, line)) {
    ++line_no;
    if (!split_csv_line(line, cells) || cells.size() != header.size()) {
      throw ConfigError(name, line_no, 0, "",
                        "row has " + std::to_string(cells.size()) + " cells, the header " +
                            std::to_string(header.size()));
    }
    auto number = [&](size_t c) -> std::optional<double> {
      if (cells[c].empty()) return std::nullopt;
      char* end = nullptr;
      const double v = std::strtod(cells[c].c_str(), &end);
      if (*end != '\0') {
        throw ConfigError(name, line_no, 0, header[c], "not a number: '" + cells[c] + "'");
      }
      return v;
    };
    const std::optional<double> config_idx = number(c_config);
    if (!config_idx) throw ConfigError(name, line_no, 0, "config_idx", "empty");
    ConfigRows& r = configs[static_cast<int64_t>(*config_idx)];
    PlanEntry& e = r.entry;
    if (r.num_rows++ == 0) {
      e.config_idx = static_cast<int64_t>(*config_idx);
      for (size_t k = c_seed + 1; k < c_status; ++k) {
        e.parameter_values.push_back(cells[k]);
        e.parameters += (e.parameters.empty() ? "" : ", ") + header[k] + "=" + cells[k];
      }
    }
    const std::string& status = cells[c_status];
    const std::string seed = "seed " + cells[c_seed];
    if (status != "ok") {
      if (r.first_error.empty()) r.first_error = status + ": " + cells[c_error];
      if (r.all_feasible) e.infeasible_reason = seed + ": status " + status;
      r.all_feasible = false;
      continue;
    }
    if (!limits) limits = cells[c_limits];
    if (cells[c_limits] != *limits) {
      throw ConfigError(name, line_no, 0, "feasible_limits",
                        "'" + cells[c_limits] + "' where earlier rows have '" + *limits + "'");
    }
    ++e.num_runs;
    e.num_gpus = static_cast<int64_t>(number(c_gpus).value_or(0));
    e.price.usd_per_hour = number(c_price);
    e.price.source = cells[c_source];
    if (const auto in = number(c_in), out = number(c_out); in && out) {
      r.sum_input += *in;
      r.sum_output += *out;
      r.outputs.push_back(*out);
      r.sum_rate += number(c_rate).value_or(0);
      ++r.n_rates;
    }
    if (const auto v = number(c_ttft)) r.sum_ttft += *v, ++r.n_ttft, r.ttfts.push_back(*v);
    if (const auto v = number(c_tpot)) r.sum_tpot += *v, ++r.n_tpot;
    if (const auto v = number(c_tpot50)) r.sum_tpot50 += *v, ++r.n_tpot50;
    r.num_met += static_cast<int64_t>(number(c_met).value_or(0));
    r.num_decided += static_cast<int64_t>(number(c_decided).value_or(0));
    if (cells[c_feasible] != "true" && r.all_feasible) {
      r.all_feasible = false;
      e.infeasible_reason = seed + ": " + cells[c_reason];
    }
  }
  plan.limits = limits.value_or("");
  plan.feasible_rule = "every run meets " + plan.limits;
  for (auto& [idx, r] : configs) plan.entries.push_back(finish_entry(r));
  mark_pareto(plan.entries);
  plan.cheapest = cheapest_feasible(plan.entries);
  return plan;
}

}  // namespace moesim::sim::study
