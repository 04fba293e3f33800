#include "sim/calibration/serving_report_writers.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace moesim::sim {
namespace {

using nlohmann::json;

std::string num(double x) {
  char b[48];
  std::snprintf(b, sizeof b, "%.4g", x);
  return b;
}

// CSV: enough digits to read back the double.
std::string precise(double x) {
  char b[48];
  std::snprintf(b, sizeof b, "%.12g", x);
  return b;
}

std::string num_or_dash(const std::optional<double>& x) { return x ? num(*x) : "-"; }

std::string pct(const std::optional<double>& x, bool sign) {
  if (!x) return "-";
  char b[48];
  std::snprintf(b, sizeof b, sign ? "%+.1f%%" : "%.1f%%", 100.0 * *x);
  return b;
}

json opt_json(const std::optional<double>& x) { return x ? json(*x) : json(nullptr); }

std::string knee_text(const KneeEstimate& k) {
  if (k.rate_per_s) return num(*k.rate_per_s) + " req/s";
  return k.above_all ? "above the highest rate" : "below the lowest rate";
}

const char* side_name(const LoadPointComparison& p) { return p.below_knee ? "below" : "above"; }

json knee_json(const KneeEstimate& k) {
  return {{"rate_per_s", opt_json(k.rate_per_s)},
          {"above_all", k.above_all},
          {"below_all", k.below_all},
          {"rule", k.rule}};
}

json side_json(const ErrorSide& s) {
  return {{"num_points", s.num_points},
          {"mean_abs_error_rel", s.num_points ? json(s.mean_abs_error_rel) : json(nullptr)},
          {"max_abs_error_rel", s.num_points ? json(s.max_abs_error_rel) : json(nullptr)},
          {"mean_error_rel", s.num_points ? json(s.mean_error_rel) : json(nullptr)},
          {"num_within_spread", s.num_within_spread}};
}

json metric_json(const MetricComparison& m) {
  const bool any = !m.engine.empty();
  return {{"engine", m.engine},
          {"engine_mean", any ? json(m.engine_mean) : json(nullptr)},
          {"engine_min", any ? json(m.engine_min) : json(nullptr)},
          {"engine_max", any ? json(m.engine_max) : json(nullptr)},
          {"spread_rel", opt_json(m.spread_rel)},
          {"simulated", opt_json(m.simulated)},
          {"error_rel", opt_json(m.error_rel)},
          {"within_spread", m.within_spread}};
}

std::string side_cells(const ErrorSide& s) {
  if (s.num_points == 0) return "- | - | - | -";
  return pct(s.mean_error_rel, true) + " | " + pct(s.mean_abs_error_rel, false) + " | " +
         pct(s.max_abs_error_rel, false) + " | " + std::to_string(s.num_within_spread) + " of " +
         std::to_string(s.num_points);
}

}  // namespace

void write_serving_markdown(std::ostream& os, const ServingComparison& c) {
  os << "# Serving validation: " << c.scenario << "\n\n";
  os << "SLOs: TTFT p99 <= " << num(c.slo.ttft_ms) << " ms and TPOT p99 <= " << num(c.slo.tpot_ms)
     << " ms (engine: the mean of its runs' p99s).\n\n";
  os << "Knee (highest offered rate meeting the SLOs): measured " << knee_text(c.measured_knee)
     << ", predicted " << knee_text(c.predicted_knee) << ", error "
     << (c.knee_error_rel ? pct(c.knee_error_rel, true) : "n/a (a knee outside the rates)")
     << ".\n\n";
  os << "- measured: " << c.measured_knee.rule << "\n- predicted: " << c.predicted_knee.rule
     << "\n\n## Load points\n\n";
  os << "| offered req/s | side of measured knee | trace | engine runs | arrived | "
        "measured SLO margin | predicted SLO margin |\n| --- | --- | --- | --- | --- | --- | --- "
        "|\n";
  for (const LoadPointComparison& p : c.points) {
    os << "| " << num(p.offered_rate_per_s) << " | " << side_name(p) << " | " << p.trace << " | "
       << p.engine_dirs.size() << " | " << p.num_arrived << " | "
       << pct(p.measured_slo_margin, true) << " | " << pct(p.predicted_slo_margin, true) << " |\n";
  }
  for (int m = 0; m < kNumServingMetrics; ++m) {
    const auto metric = static_cast<ServingMetric>(m);
    os << "\n## " << serving_metric_name(metric) << " (" << serving_metric_unit(metric)
       << ")\n\n| offered req/s | side | engine mean | engine min .. max | spread +- | "
          "simulated | error | within spread |\n| --- | --- | --- | --- | --- | --- | --- | --- "
          "|\n";
    for (const LoadPointComparison& p : c.points) {
      const MetricComparison& x = p.metrics[static_cast<size_t>(m)];
      const bool any = !x.engine.empty();
      os << "| " << num(p.offered_rate_per_s) << " | " << side_name(p) << " | "
         << (any ? num(x.engine_mean) : "-") << " | "
         << (any ? num(x.engine_min) + " .. " + num(x.engine_max) : "-") << " | "
         << pct(x.spread_rel, false) << " | " << num_or_dash(x.simulated) << " | "
         << pct(x.error_rel, true) << " | " << (x.within_spread ? "yes" : "no") << " |\n";
    }
  }
  os << "\n## Errors below and above the measured knee\n\n"
        "| metric | below: mean error | mean abs | max abs | within spread | above: mean error | "
        "mean abs | max abs | within spread |\n| --- | --- | --- | --- | --- | --- | --- | --- | "
        "--- |\n";
  for (const MetricErrorSplit& s : c.splits) {
    os << "| " << serving_metric_name(s.metric) << " | " << side_cells(s.below) << " | "
       << side_cells(s.above) << " |\n";
  }
}

void write_serving_json(std::ostream& os, const ServingComparison& c) {
  json points = json::array();
  for (const LoadPointComparison& p : c.points) {
    json metrics = json::object();
    for (const MetricComparison& m : p.metrics)
      metrics[serving_metric_name(m.metric)] = metric_json(m);
    points.push_back({{"trace", p.trace},
                      {"engine_runs", p.engine_dirs},
                      {"simulated_run", p.simulated_dir},
                      {"arrived", p.num_arrived},
                      {"offered_rate_per_s", p.offered_rate_per_s},
                      {"side", side_name(p)},
                      {"measured_slo_margin", opt_json(p.measured_slo_margin)},
                      {"predicted_slo_margin", opt_json(p.predicted_slo_margin)},
                      {"measured_meets_slo", p.measured_meets_slo},
                      {"predicted_meets_slo", p.predicted_meets_slo},
                      {"metrics", metrics}});
  }
  json splits = json::object();
  for (const MetricErrorSplit& s : c.splits) {
    splits[serving_metric_name(s.metric)] = {{"below", side_json(s.below)},
                                             {"above", side_json(s.above)}};
  }
  const json j = {{"schema", "moesim.serving_validation.v1"},
                  {"scenario", c.scenario},
                  {"slo", {{"ttft_p99_ms", c.slo.ttft_ms}, {"tpot_p99_ms", c.slo.tpot_ms}}},
                  {"knee",
                   {{"measured", knee_json(c.measured_knee)},
                    {"predicted", knee_json(c.predicted_knee)},
                    {"error_rel", opt_json(c.knee_error_rel)}}},
                  {"points", points},
                  {"errors_by_side", splits}};
  os << j.dump(2) << "\n";
}

void write_serving_points_csv(std::ostream& os, const ServingComparison& c) {
  os << "trace,offered_rate_per_s,side,metric,unit,engine_runs,engine_mean,engine_min,engine_max,"
        "spread_rel,simulated,error_rel,within_spread\n";
  auto cell = [](const std::optional<double>& x) { return x ? precise(*x) : std::string(); };
  for (const LoadPointComparison& p : c.points) {
    for (const MetricComparison& m : p.metrics) {
      const bool any = !m.engine.empty();
      // Trace paths are written by people: quoted as RFC 4180 wants when they hold a comma.
      std::string trace = p.trace;
      if (trace.find_first_of(",\"\n") != std::string::npos) {
        std::string q = "\"";
        for (char ch : trace) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        trace = q + "\"";
      }
      os << trace << "," << precise(p.offered_rate_per_s) << "," << side_name(p) << ","
         << serving_metric_name(m.metric) << "," << serving_metric_unit(m.metric) << ","
         << m.engine.size() << "," << (any ? precise(m.engine_mean) : "") << ","
         << (any ? precise(m.engine_min) : "") << "," << (any ? precise(m.engine_max) : "") << ","
         << cell(m.spread_rel) << "," << cell(m.simulated) << "," << cell(m.error_rel) << ","
         << (m.within_spread ? "true" : "false") << "\n";
    }
  }
}

}  // namespace moesim::sim
