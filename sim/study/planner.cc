#include "sim/study/planner.h"

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "sim/config/config_error.h"
#include "sim/metrics/figure_text.h"
#include "sim/study/csv.h"

namespace moesim::sim::study {
namespace {

constexpr double kSecondsPerHour = 3600.0;
constexpr double kMillion = 1e6;

std::optional<double> per_gpu(std::optional<double> tokens_per_s, int64_t num_gpus) {
  if (!tokens_per_s || num_gpus < 1) return std::nullopt;
  return *tokens_per_s / static_cast<double>(num_gpus);
}

// GPUs x 1e6 / (tokens/s x 3600); absent at 0 tokens/s (no token was served: no finite cost).
std::optional<double> gpu_hours_per_m(std::optional<double> tokens_per_s, int64_t num_gpus) {
  if (!tokens_per_s || !(*tokens_per_s > 0) || num_gpus < 1) return std::nullopt;
  return static_cast<double>(num_gpus) * kMillion / (*tokens_per_s * kSecondsPerHour);
}

std::optional<double> times(std::optional<double> a, std::optional<double> b) {
  if (!a || !b) return std::nullopt;
  return *a * *b;
}

std::string cell(std::optional<double> v) { return v ? number_text(*v) : ""; }
using Json = nlohmann::ordered_json;  // keys in the order written

Json json_number(std::optional<double> v) { return v ? Json(clean_double(*v)) : Json(nullptr); }
std::string text4(std::optional<double> v) {
  if (!v) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", *v);
  return buf;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const char* status_of(const PlanEntry& e) { return e.error.empty() ? "ok" : "error"; }

// True when a is at least as good as b on every axis and better on one (all lower is better).
bool dominates(const double a[3], const double b[3]) {
  bool better = false;
  for (int k = 0; k < 3; ++k) {
    if (a[k] > b[k]) return false;
    if (a[k] < b[k]) better = true;
  }
  return better;
}

}  // namespace

GpuPrice gpu_price(const Scenario& scenario, std::optional<double> flag_usd_per_hour) {
  if (flag_usd_per_hour) return {flag_usd_per_hour, "flag"};
  if (scenario.topology && scenario.topology->gpu_spec().price_usd_per_hour) {
    return {scenario.topology->gpu_spec().price_usd_per_hour, "topology"};
  }
  return {};
}

CostFigures cost_figures(int64_t num_gpus, std::optional<double> input_tokens_per_s,
                         std::optional<double> output_tokens_per_s, const GpuPrice& price) {
  CostFigures c;
  c.input_tokens_per_s_per_gpu = per_gpu(input_tokens_per_s, num_gpus);
  c.output_tokens_per_s_per_gpu = per_gpu(output_tokens_per_s, num_gpus);
  c.gpu_hours_per_m_input_tokens = gpu_hours_per_m(input_tokens_per_s, num_gpus);
  c.gpu_hours_per_m_output_tokens = gpu_hours_per_m(output_tokens_per_s, num_gpus);
  c.usd_per_m_input_tokens = times(c.gpu_hours_per_m_input_tokens, price.usd_per_hour);
  c.usd_per_m_output_tokens = times(c.gpu_hours_per_m_output_tokens, price.usd_per_hour);
  return c;
}

std::optional<double> tokens_per_s_per_user(std::optional<double> tpot_p50_ms) {
  if (!tpot_p50_ms || !(*tpot_p50_ms > 0)) return std::nullopt;
  return 1000.0 / *tpot_p50_ms;
}

bool cost_axis_is_usd(const std::vector<PlanEntry>& entries) {
  bool any = false;
  for (const PlanEntry& e : entries) {
    if (!e.error.empty() || !e.cost.gpu_hours_per_m_output_tokens) continue;
    if (!e.cost.usd_per_m_output_tokens) return false;
    any = true;
  }
  return any;
}

std::optional<double> cost_on_axis(const PlanEntry& entry, bool usd) {
  return usd ? entry.cost.usd_per_m_output_tokens : entry.cost.gpu_hours_per_m_output_tokens;
}

void mark_pareto(std::vector<PlanEntry>& entries) {
  const bool usd = cost_axis_is_usd(entries);
  std::vector<size_t> candidates;
  std::vector<std::array<double, 3>> axes;
  for (size_t i = 0; i < entries.size(); ++i) {
    PlanEntry& e = entries[i];
    e.pareto = false;
    const std::optional<double> cost = cost_on_axis(e, usd);
    if (!e.error.empty() || !cost || !e.ttft_p99_ms || !e.tpot_p99_ms) continue;
    candidates.push_back(i);
    axes.push_back({*cost, *e.ttft_p99_ms, *e.tpot_p99_ms});
  }
  for (size_t a = 0; a < candidates.size(); ++a) {
    bool dominated = false;
    for (size_t b = 0; b < candidates.size() && !dominated; ++b) {
      dominated = b != a && dominates(axes[b].data(), axes[a].data());
    }
    entries[candidates[a]].pareto = !dominated;
  }
}

std::optional<size_t> cheapest_feasible(const std::vector<PlanEntry>& entries) {
  const bool usd = cost_axis_is_usd(entries);
  std::optional<size_t> best;
  std::optional<double> best_cost;
  for (size_t i = 0; i < entries.size(); ++i) {
    const PlanEntry& e = entries[i];
    const std::optional<double> cost = cost_on_axis(e, usd);
    if (!e.error.empty() || !e.feasible || !cost) continue;
    if (!best || *cost < *best_cost ||
        (*cost == *best_cost && e.num_gpus < entries[*best].num_gpus)) {
      best = i;
      best_cost = cost;
    }
  }
  return best;
}

void write_plan_csv(const Plan& plan, std::ostream& out) {
  std::vector<std::string> header = {"config_idx"};
  for (const std::string& k : plan.parameter_keys) header.push_back(k);
  for (const char* c : {"status",
                        "error",
                        "num_gpus",
                        "num_runs",
                        "rate_per_s",
                        "input_tokens_per_s",
                        "output_tokens_per_s",
                        "input_tokens_per_s_per_gpu",
                        "output_tokens_per_s_per_gpu",
                        "tpot_p50_ms",
                        "output_tokens_per_s_per_user",
                        "gpu_price_per_hour",
                        "gpu_price_source",
                        "gpu_hours_per_m_input_tokens",
                        "gpu_hours_per_m_output_tokens",
                        "usd_per_m_input_tokens",
                        "usd_per_m_output_tokens",
                        "ttft_p99_ms",
                        "tpot_p99_ms",
                        "slo_attainment",
                        "output_tokens_per_s_ci95",
                        "ttft_p99_ms_ci95",
                        "feasible",
                        "infeasible_reason",
                        "pareto",
                        "cheapest"}) {
    header.push_back(c);
  }
  out << csv_line(header) << "\n";
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const PlanEntry& e = plan.entries[i];
    std::vector<std::string> cells = {std::to_string(e.config_idx)};
    for (size_t k = 0; k < plan.parameter_keys.size(); ++k) {
      cells.push_back(k < e.parameter_values.size() ? e.parameter_values[k] : "");
    }
    const bool ok = e.error.empty();
    cells.insert(cells.end(), {status_of(e),
                               e.error,
                               ok ? std::to_string(e.num_gpus) : "",
                               std::to_string(e.num_runs),
                               cell(e.rate_per_s),
                               cell(e.input_tokens_per_s),
                               cell(e.output_tokens_per_s),
                               cell(e.cost.input_tokens_per_s_per_gpu),
                               cell(e.cost.output_tokens_per_s_per_gpu),
                               cell(e.tpot_p50_ms),
                               cell(e.output_tokens_per_s_per_user),
                               cell(e.price.usd_per_hour),
                               e.price.source,
                               cell(e.cost.gpu_hours_per_m_input_tokens),
                               cell(e.cost.gpu_hours_per_m_output_tokens),
                               cell(e.cost.usd_per_m_input_tokens),
                               cell(e.cost.usd_per_m_output_tokens),
                               cell(e.ttft_p99_ms),
                               cell(e.tpot_p99_ms),
                               cell(e.slo_attainment),
                               cell(e.output_tokens_per_s_half_width),
                               cell(e.ttft_p99_ms_half_width),
                               e.feasible ? "true" : "false",
                               e.infeasible_reason,
                               e.pareto ? "true" : "false",
                               plan.cheapest == i ? "true" : "false"});
    out << csv_line(cells) << "\n";
  }
}

void write_plan_json(const Plan& plan, std::ostream& out) {
  const bool usd = cost_axis_is_usd(plan.entries);
  Json j;
  j["command"] = plan.command;
  j["limits"] = plan.limits;
  j["feasible_rule"] = plan.feasible_rule;
  j["cost_axis"] = usd ? "usd_per_m_output_tokens" : "gpu_hours_per_m_output_tokens";
  j["pareto_axes"] = {j["cost_axis"], "ttft_p99_ms", "tpot_p99_ms"};
  j["cheapest_rule"] = plan.cheapest_rule;
  j["configs"] = Json::array();
  j["feasible"] = Json::array();
  j["pareto"] = Json::array();
  for (const PlanEntry& e : plan.entries) {
    Json c;
    c["config_idx"] = e.config_idx;
    c["parameters"] = Json::object();
    for (size_t k = 0; k < plan.parameter_keys.size() && k < e.parameter_values.size(); ++k) {
      c["parameters"][plan.parameter_keys[k]] = e.parameter_values[k];
    }
    c["status"] = status_of(e);
    if (!e.error.empty()) {
      c["error"] = e.error;
    } else {
      c["num_gpus"] = e.num_gpus;
    }
    c["num_runs"] = e.num_runs;
    c["rate_per_s"] = json_number(e.rate_per_s);
    c["input_tokens_per_s"] = json_number(e.input_tokens_per_s);
    c["output_tokens_per_s"] = json_number(e.output_tokens_per_s);
    c["input_tokens_per_s_per_gpu"] = json_number(e.cost.input_tokens_per_s_per_gpu);
    c["output_tokens_per_s_per_gpu"] = json_number(e.cost.output_tokens_per_s_per_gpu);
    c["tpot_p50_ms"] = json_number(e.tpot_p50_ms);
    c["output_tokens_per_s_per_user"] = json_number(e.output_tokens_per_s_per_user);
    c["gpu_price_per_hour"] = json_number(e.price.usd_per_hour);
    c["gpu_price_source"] = e.price.source.empty() ? Json(nullptr) : Json(e.price.source);
    c["gpu_hours_per_m_input_tokens"] = json_number(e.cost.gpu_hours_per_m_input_tokens);
    c["gpu_hours_per_m_output_tokens"] = json_number(e.cost.gpu_hours_per_m_output_tokens);
    c["usd_per_m_input_tokens"] = json_number(e.cost.usd_per_m_input_tokens);
    c["usd_per_m_output_tokens"] = json_number(e.cost.usd_per_m_output_tokens);
    c["ttft_p99_ms"] = json_number(e.ttft_p99_ms);
    c["tpot_p99_ms"] = json_number(e.tpot_p99_ms);
    c["output_tokens_per_s_ci95"] = json_number(e.output_tokens_per_s_half_width);
    c["ttft_p99_ms_ci95"] = json_number(e.ttft_p99_ms_half_width);
    c["slo_attainment"] = json_number(e.slo_attainment);
    c["feasible"] = e.feasible;
    c["infeasible_reason"] = e.infeasible_reason;
    c["pareto"] = e.pareto;
    if (e.feasible) j["feasible"].push_back(e.config_idx);
    if (e.pareto) j["pareto"].push_back(e.config_idx);
    j["configs"].push_back(std::move(c));
  }
  j["cheapest_feasible"] = nullptr;
  if (plan.cheapest) j["cheapest_feasible"] = j["configs"][*plan.cheapest];
  out << j.dump(2) << "\n";
}

std::string plan_summary_text(const Plan& plan) {
  const bool usd = cost_axis_is_usd(plan.entries);
  int64_t num_feasible = 0, num_ok = 0, num_pareto = 0, num_pareto_feasible = 0;
  std::string pareto;
  bool any_price = false, any_missing_price = false;
  for (const PlanEntry& e : plan.entries) {
    if (!e.error.empty()) continue;
    ++num_ok;
    num_feasible += e.feasible ? 1 : 0;
    if (e.pareto) {
      pareto += (pareto.empty() ? "" : ", ") + std::to_string(e.config_idx);
      ++num_pareto;
      num_pareto_feasible += e.feasible ? 1 : 0;
    }
    (e.price.usd_per_hour ? any_price : any_missing_price) = true;
  }
  std::string out = "  feasible (" + plan.feasible_rule + "): " + std::to_string(num_feasible) +
                    " of " + std::to_string(plan.entries.size()) + " configurations";
  if (num_ok < static_cast<int64_t>(plan.entries.size())) {
    out += " (" + std::to_string(plan.entries.size() - num_ok) + " did not run)";
  }
  // The frontier is of every configuration that ran, feasible or not: said, with its feasible
  // count.
  out +=
      "\n  Pareto frontier of the configurations that ran, feasible or not (cost per million "
      "output tokens, TTFT p99, TPOT p99): ";
  out += pareto.empty() ? "none (no configuration has all three figures)"
                        : "configs " + pareto + "; " + std::to_string(num_pareto_feasible) +
                              " of these " + std::to_string(num_pareto) + " feasible";
  out += "\n";
  if (plan.cheapest) {
    const PlanEntry& e = plan.entries[*plan.cheapest];
    out += "  cheapest feasible (" + plan.cheapest_rule + "): config " +
           std::to_string(e.config_idx) + (e.parameters.empty() ? "" : " (" + e.parameters + ")") +
           ", " + std::to_string(e.num_gpus) + " GPUs, " +
           text4(e.cost.output_tokens_per_s_per_gpu) + " output tok/s per GPU, " +
           text4(e.output_tokens_per_s_per_user) + " output tok/s per user, ";
    out += usd ? "$" + text4(e.cost.usd_per_m_output_tokens) + " per million output tokens ($" +
                     text4(e.cost.usd_per_m_input_tokens) + " per million input tokens)"
               : text4(e.cost.gpu_hours_per_m_output_tokens) +
                     " GPU-hours per million output tokens (" +
                     text4(e.cost.gpu_hours_per_m_input_tokens) + " per million input tokens)";
    out += "\n";
  } else {
    out += "  cheapest feasible: none (no configuration is feasible)\n";
  }
  if (!any_price && num_ok > 0) {
    out +=
        "  cost: no GPU price (give --gpu-price-per-hour USD or [gpu] price_usd_per_hour in the "
        "topology): costs in GPU-hours only\n";
  } else if (any_missing_price && any_price) {
    out += "  cost: some configurations have no GPU price: costs compared in GPU-hours\n";
  }
  return out;
}

void write_plan(const Plan& plan, const std::string& path, std::ostream& out) {
  if (ends_with(path, ".csv")) {
    write_plan_csv(plan, out);
  } else {
    write_plan_json(plan, out);
  }
}

void check_plan_path(const std::string& path, const std::string& option) {
  if (!ends_with(path, ".csv") && !ends_with(path, ".json")) {
    throw ConfigError(option, 0, 0, "",
                      "'" + path + "': the plan's file name must end in .csv or .json");
  }
}

}  // namespace moesim::sim::study
