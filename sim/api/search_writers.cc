// The writers of a search's report (search.h): the JSON document and the text table of
// `moesim search`.
#include <cstdio>

#include "sim/api/diagnosis_writers.h"
#include "sim/api/search.h"
#include "sim/api/text_format.h"
#include "sim/metrics/figure_text.h"

namespace moesim::sim::api {
namespace {

nlohmann::json number(const std::optional<double>& v) {
  return v ? nlohmann::json(clean_double(*v)) : nlohmann::json(nullptr);
}
// null where there is no such rate: none met, or none failed.
nlohmann::json rate(double v, bool has) {
  return has ? nlohmann::json(clean_double(v)) : nlohmann::json(nullptr);
}

nlohmann::json probes_json(const study::ConfigSearch& c) {
  nlohmann::json probes = nlohmann::json::array();
  for (const auto& p : c.probes) {
    probes.push_back({{"multiplier", clean_double(p.multiplier)},
                      {"rate_per_s", clean_double(p.rate_per_s)},
                      {"meets", p.verdict.meets},
                      {"attainment", rate(p.verdict.attainment, p.verdict.num_decided > 0)},
                      {"num_met", p.verdict.num_met},
                      {"num_decided", p.verdict.num_decided},
                      {"reason", p.verdict.reason},
                      {"output_tokens_per_s", number(p.output_tokens_per_s)},
                      {"ttft_p99_ms", number(p.ttft_p99_ms)},
                      {"tpot_p99_ms", number(p.tpot_p99_ms)},
                      {"tpot_p50_ms", number(p.tpot_p50_ms)}});
  }
  return probes;
}

// The figures of a configuration that was searched (no error).
void searched_config_json(const study::ConfigSearch& c, const study::PlanEntry& e,
                          nlohmann::json& cj) {
  cj["num_gpus"] = c.num_gpus;
  cj["rate_unit"] = c.rate_unit;
  cj["base_rate_per_s"] = c.base_rate_per_s;
  const bool trace = c.trace_rate_per_s > 0;
  cj["trace_rate_per_s"] =
      trace ? nlohmann::json(clean_double(c.trace_rate_per_s)) : nlohmann::json(nullptr);
  const bool failed = c.search.min_fail > 0;
  cj["infeasible"] = c.diagnosis.infeasible();
  cj["not_probed"] = c.not_probed;
  cj["diagnosis"] = nullptr;
  if (c.diagnosis.done) cj["diagnosis"] = diagnosis_report_json(c.diagnosis);
  cj["found"] = c.search.found;
  cj["max_multiplier"] = rate(c.search.max_ok, c.search.found);
  cj["max_trace_multiplier"] = rate(c.search.max_ok * c.trace_multiplier, c.search.found && trace);
  cj["max_rate_per_s"] = rate(c.max_rate_per_s, c.search.found);
  const std::optional<study::RateInterval> iv = study::rate_interval(c);
  cj["replications"] = 1 + static_cast<int64_t>(c.replicates.size());
  cj["max_rate_mean_per_s"] = iv ? nlohmann::json(clean_double(iv->mean)) : nlohmann::json(nullptr);
  cj["max_rate_interval_per_s"] =
      iv ? nlohmann::json::array({clean_double(iv->lo), clean_double(iv->hi)})
         : nlohmann::json(nullptr);
  cj["first_failing_multiplier"] = rate(c.search.min_fail, failed);
  cj["first_failing_rate_per_s"] = rate(c.fail_rate_per_s, failed);
  cj["input_tokens_per_s"] = number(e.input_tokens_per_s);
  cj["output_tokens_per_s"] = number(e.output_tokens_per_s);
  cj["input_tokens_per_s_per_gpu"] = number(e.cost.input_tokens_per_s_per_gpu);
  cj["output_tokens_per_s_per_gpu"] = number(e.cost.output_tokens_per_s_per_gpu);
  cj["tpot_p50_ms"] = number(e.tpot_p50_ms);
  cj["output_tokens_per_s_per_user"] = number(e.output_tokens_per_s_per_user);
  cj["gpu_price_per_hour"] = number(c.price.usd_per_hour);
  cj["gpu_price_source"] =
      c.price.source.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.price.source);
  cj["gpu_hours_per_m_input_tokens"] = number(e.cost.gpu_hours_per_m_input_tokens);
  cj["gpu_hours_per_m_output_tokens"] = number(e.cost.gpu_hours_per_m_output_tokens);
  cj["usd_per_m_input_tokens"] = number(e.cost.usd_per_m_input_tokens);
  cj["usd_per_m_output_tokens"] = number(e.cost.usd_per_m_output_tokens);
  cj["probes"] = probes_json(c);
}

nlohmann::json config_json(const study::ConfigSearch& c, const study::PlanEntry& e) {
  nlohmann::json cj;
  cj["config_idx"] = c.config_idx;
  for (const auto& o : c.overrides) {
    cj["parameters"][o.key_path] = study::override_value_text(o.value);
  }
  if (!c.error.empty()) {
    cj["error"] = c.error;
  } else {
    searched_config_json(c, e, cj);
  }
  cj["feasible"] = e.feasible;
  cj["infeasible_reason"] = e.infeasible_reason;
  cj["pareto"] = e.pareto;
  return cj;
}

std::string config_text(const study::ConfigSearch& c) { return study::overrides_text(c.overrides); }

// "-" where there is no such rate (none met, or none failed), never a 0.
std::string g4(const std::optional<double>& v) {
  return v ? format_text("%.4g", *v) : std::string("-");
}
std::optional<double> when(bool has, double v) {
  return has ? std::optional<double>(v) : std::nullopt;
}

// The first configuration without an error, and whether any is a trace replay.
struct TableShape {
  const study::ConfigSearch* first = nullptr;
  bool any_trace = false;
  std::string unit = "req/s";
};

TableShape table_shape(const study::SearchResult& r) {
  TableShape shape;
  for (const auto& c : r.configs) {
    if (!c.error.empty()) continue;
    if (!shape.first) shape.first = &c;
    shape.any_trace = shape.any_trace || c.trace_rate_per_s > 0;
  }
  if (shape.first) shape.unit = shape.first->rate_unit;
  return shape;
}

void write_header(std::ostream& os, const SearchReport& report, const TableShape& shape) {
  const study::SearchSlo& slo = report.slo;
  os << "search " << report.scenario_path << "\n  SLO:";
  for (const auto& l : slo.percentile_limits) {
    os << format_text(" %s <= %g,", l.name.c_str(), l.limit_ms);
  }
  os << format_text(" attainment >= %g", slo.min_attainment);
  if (slo.request_ttft_ms) os << format_text(", per-request ttft <= %g ms", *slo.request_ttft_ms);
  if (slo.request_tpot_ms) os << format_text(", per-request tpot <= %g ms", *slo.request_tpot_ms);
  os << "\n";
  const study::ConfigSearch* first = shape.first;
  // The rate multipliers against the workload's own rate (a trace's real rate).
  if (first && first->trace_rate_per_s > 0) {
    os << format_text(
        "  rate: x base 1 = %.4g %s = %g x the trace's real rate of %.4g req/s (its mean over "
        "the replay window)\n",
        first->base_rate_per_s, shape.unit.c_str(), first->trace_multiplier,
        first->trace_rate_per_s);
  } else if (first) {
    os << format_text("  rate: x base 1 = %.4g %s (the workload's arrival.rate_per_s)\n",
                      first->base_rate_per_s, shape.unit.c_str());
  }
}

// The diagnosis: what no rate can fix. Returns the configurations infeasible at any rate.
int64_t write_diagnosis(std::ostream& os, const study::SearchResult& r, const TableShape& shape) {
  int64_t num_infeasible = 0, num_noted = 0;
  for (const auto& c : r.configs) {
    if (!c.diagnosis.done || c.diagnosis.findings.empty()) continue;
    if (num_noted++ == 0) {
      os << "\n  diagnosis (before the probes; each request alone on an idle replica, the step "
            "model's lower bounds):\n";
    }
    num_infeasible += c.diagnosis.infeasible() ? 1 : 0;
    os << format_text("  config %lld:%s\n", static_cast<long long>(c.config_idx),
                      c.diagnosis.infeasible() ? " INFEASIBLE AT ANY RATE" : "");
    os << diagnosis_findings_text(c.diagnosis, "    ");
  }
  if (num_noted == 0 && shape.first && shape.first->diagnosis.done) {
    os << "\n  diagnosis: no request is beyond a limit on its own (isolated prefill, decode, KV "
          "fit) in any configuration\n";
  }
  return num_infeasible;
}

void write_config_row(std::ostream& os, const SearchReport& report, const TableShape& shape,
                      const study::ConfigSearch& c, const study::PlanEntry& e, bool usd) {
  if (!c.error.empty()) {
    os << format_text("  %-6lld error: %s  (%s)\n", static_cast<long long>(c.config_idx),
                      c.error.c_str(), config_text(c).c_str());
    return;
  }
  if (c.not_probed) {
    os << format_text(
        "  %-6lld %-5lld infeasible at any rate (not probed; see the diagnosis)  %s\n",
        static_cast<long long>(c.config_idx), static_cast<long long>(c.num_gpus),
        report.grid ? config_text(c).c_str() : "");
    return;
  }
  const bool found = c.search.found;
  os << format_text("  %-6lld %-5lld %12s %8s", static_cast<long long>(c.config_idx),
                    static_cast<long long>(c.num_gpus), g4(when(found, c.max_rate_per_s)).c_str(),
                    g4(when(found, c.search.max_ok)).c_str());
  if (shape.any_trace) {
    os << format_text(
        " %8s",
        g4(when(found && c.trace_rate_per_s > 0, c.search.max_ok * c.trace_multiplier)).c_str());
  }
  const std::optional<double> cost_in =
      usd ? e.cost.usd_per_m_input_tokens : e.cost.gpu_hours_per_m_input_tokens;
  os << format_text(
      "  %13s %14s  %11s %10s %14s  %s\n", g4(e.cost.output_tokens_per_s_per_gpu).c_str(),
      g4(e.output_tokens_per_s_per_user).c_str(), g4(study::cost_on_axis(e, usd)).c_str(),
      g4(cost_in).c_str(), g4(when(c.search.min_fail > 0, c.fail_rate_per_s)).c_str(),
      report.grid ? config_text(c).c_str() : "");
  if (!found) {
    os << "         " << study::no_rate_reason(c) << "\n";
  } else if (c.search.min_fail == 0) {
    os << "         meets the SLOs at every probed rate (a lower bound)\n";
  }
  if (const std::optional<study::RateInterval> iv = study::rate_interval(c)) {
    os << "         max rate over " << iv->num_seeds
       << " seeds: " << study::interval_text(iv->mean, iv->lo, iv->hi) << " " << c.rate_unit
       << " (95% interval, docs/sweeps.md)\n";
  } else if (!c.replicates.empty()) {
    os << "         no interval: some seed found no bracket (no rate met, or every one did)\n";
  }
  if (c.diagnosis.infeasible()) {
    os << "         (probed with --probe-infeasible: the diagnosis says no rate meets the SLOs)\n";
  }
}

void write_footer(std::ostream& os, const SearchReport& report, const TableShape& shape,
                  int64_t num_infeasible) {
  const study::SearchResult& r = report.result;
  os << format_text(
      "\n  rates in %s; x base: the multiplier on the configuration's own rate;%s first failing:\n"
      "  the lowest probed rate above the max that broke the SLOs; per GPU, per user (1000 / "
      "TPOT p50)\n  and cost at the max rate\n",
      shape.unit.c_str(), shape.any_trace ? " x trace: on the trace's real rate;" : "");
  if (num_infeasible > 0) {
    os << format_text(
        "  %lld of %zu configurations infeasible at any rate%s\n",
        static_cast<long long>(num_infeasible), r.configs.size(),
        report.probe_infeasible ? "" : " (not probed; --probe-infeasible probes them)");
  }
  os << study::plan_summary_text(report.plan);
  if (report.plan_path) os << "  plan -> " << *report.plan_path << "\n";
  if (!report.target_rate_per_s) return;
  const double target = *report.target_rate_per_s;
  if (r.cheapest) {
    const auto& c = r.configs[*r.cheapest];
    os << format_text("  cheapest sustaining %g/s: config %lld (%s), %lld GPUs, max %.4g/s\n",
                      target, static_cast<long long>(c.config_idx), config_text(c).c_str(),
                      static_cast<long long>(c.num_gpus), c.max_rate_per_s);
  } else {
    os << format_text("  no configuration sustains %g/s\n", target);
  }
}

}  // namespace

nlohmann::json search_json(const SearchReport& report) {
  const study::SearchSlo& slo = report.slo;
  const study::SearchResult& r = report.result;
  const study::Plan& plan = report.plan;
  nlohmann::json j;
  j["scenario"] = report.scenario_path;
  j["slo"]["min_attainment"] = slo.min_attainment;
  for (const auto& l : slo.percentile_limits) j["slo"][l.name] = l.limit_ms;
  if (slo.request_ttft_ms) j["slo"]["ttft_ms"] = *slo.request_ttft_ms;
  if (slo.request_tpot_ms) j["slo"]["tpot_ms"] = *slo.request_tpot_ms;
  j["configs"] = nlohmann::json::array();
  j["feasible"] = nlohmann::json::array();
  j["pareto"] = nlohmann::json::array();
  for (size_t i = 0; i < r.configs.size(); ++i) {
    const study::PlanEntry& e = plan.entries[i];
    if (e.feasible) j["feasible"].push_back(r.configs[i].config_idx);
    if (e.pareto) j["pareto"].push_back(r.configs[i].config_idx);
    j["configs"].push_back(config_json(r.configs[i], e));
  }
  if (report.target_rate_per_s) j["target_rate_per_s"] = *report.target_rate_per_s;
  if (r.cheapest) j["cheapest_config_idx"] = r.configs[*r.cheapest].config_idx;
  const bool usd = study::cost_axis_is_usd(plan.entries);
  j["cost_axis"] = usd ? "usd_per_m_output_tokens" : "gpu_hours_per_m_output_tokens";
  j["feasible_rule"] = plan.feasible_rule;
  j["cheapest_rule"] = plan.cheapest_rule;
  j["cheapest_feasible_config_idx"] = plan.cheapest
                                          ? nlohmann::json(plan.entries[*plan.cheapest].config_idx)
                                          : nlohmann::json(nullptr);
  return j;
}

void write_search_text(std::ostream& os, const SearchReport& report) {
  const study::SearchResult& r = report.result;
  const TableShape shape = table_shape(r);
  write_header(os, report, shape);
  const int64_t num_infeasible = write_diagnosis(os, r, shape);
  const bool usd = study::cost_axis_is_usd(report.plan.entries);
  os << format_text("\n  %-6s %-5s %12s %8s", "config", "gpus", "max rate", "x base");
  if (shape.any_trace) os << format_text(" %8s", "x trace");
  os << format_text("  %13s %14s  %11s %10s %14s  %s\n", "out tok/s/GPU", "out tok/s/user",
                    usd ? "$/M out" : "GPU-h/M out", usd ? "$/M in" : "GPU-h/M in", "first failing",
                    report.grid ? "parameters" : "");
  for (size_t i = 0; i < r.configs.size(); ++i) {
    write_config_row(os, report, shape, r.configs[i], report.plan.entries[i], usd);
  }
  write_footer(os, report, shape, num_infeasible);
}

}  // namespace moesim::sim::api
