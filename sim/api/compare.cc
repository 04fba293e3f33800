#include "sim/api/compare.h"

#include <cmath>

#include "sim/api/text_format.h"
#include "sim/api/usage_error.h"
#include "sim/metrics/figure_text.h"
#include "sim/study/parallel_runs.h"

namespace moesim::sim::api {
namespace {

void check_request(const CompareRequest& r) {
  if (r.seed && *r.seed < 0) throw UsageError{"--seed must be >= 0"};
  if (r.replications && (*r.replications < 1 || *r.replications > 100000)) {
    throw UsageError{"--replications must be in 1..100000"};
  }
  if (r.resamples && (*r.resamples < 1 || *r.resamples > 10000000)) {
    throw UsageError{"--resamples must be in 1..10000000"};
  }
  if (r.confidence && !(*r.confidence > 0 && *r.confidence < 1)) {
    throw UsageError{"--confidence must be in (0, 1)"};
  }
  // run.duration_s's range (also what keeps the run's end within the horizon).
  if (r.duration_s && !(*r.duration_s >= 1e-6 && *r.duration_s <= 1e7)) {
    throw UsageError{"--duration must be in [1e-6, 1e7] seconds (run.duration_s's range)"};
  }
  if (r.threads && (*r.threads < 1 || *r.threads > 4096)) {
    throw UsageError{"--threads must be in 1..4096"};
  }
}

// "without policies; scheduler.max_seqs=64": what the drops and overrides did to a side, "" if
// nothing.
std::string changes_text(const ScenarioSource& side) {
  std::string out;
  for (const std::string& d : side.dropped) out += (out.empty() ? "without " : ", without ") + d;
  if (!side.overrides.empty()) {
    out += (out.empty() ? "" : "; ") + study::overrides_text(side.overrides);
  }
  return out;
}

std::string with_changes(const std::string& changes) {
  return changes.empty() ? "" : " (" + changes + ")";
}

// A figure, null where there is no data (NaN, sim/study/compare.h).
nlohmann::json figure_json(double v) {
  return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(clean_double(v));
}

// a and b are null on a difference-only row (they are not figures of the runs).
nlohmann::json metric_json(const study::MetricComparison& m) {
  nlohmann::json j = {
      {"metric", m.metric},
      {"unit", m.unit},
      {"a", m.difference_only ? nlohmann::json(nullptr) : figure_json(m.a)},
      {"b", m.difference_only ? nlohmann::json(nullptr) : figure_json(m.b)},
      {"diff", figure_json(m.diff)},
      {"rel_diff", m.difference_only ? nlohmann::json(nullptr) : figure_json(m.rel_diff)}};
  if (m.has_ci) j["ci"] = {figure_json(m.ci_lo), figure_json(m.ci_hi)};
  return j;
}

// "%.5g" of v (with a sign when `sign`), "n/a" for no data.
std::string cell(double v, bool sign = false) {
  if (std::isnan(v)) return "n/a";
  return format_text(sign ? "%+.5g" : "%.5g", v);
}

// One row: metric, unit, A, B, B - A, (B - A) / |A| in %, interval. A difference-only row shows
// its difference and interval only.
void write_metric(std::ostream& os, const study::MetricComparison& m) {
  const std::string rel =
      std::isnan(m.rel_diff) ? std::string("n/a") : format_text("%+.2f%%", 100 * m.rel_diff);
  const bool d = m.difference_only;
  os << format_text("  %-26s %-10s %12s %12s %12s %9s", m.metric.c_str(), m.unit.c_str(),
                    d ? "-" : cell(m.a).c_str(), d ? "-" : cell(m.b).c_str(),
                    cell(m.diff, true).c_str(), d ? "-" : rel.c_str());
  if (m.has_ci) {
    os << format_text("   [%s, %s]%s\n", cell(m.ci_lo, true).c_str(), cell(m.ci_hi, true).c_str(),
                      m.ci_lo > 0 || m.ci_hi < 0 ? " *" : "");
  } else {
    os << "   n/a\n";
  }
}

void write_header(std::ostream& os, const CompareReport& report) {
  const study::CompareResult& r = report.result;
  const study::CompareOptions& opt = report.options;
  os << format_text("compare  A = %s%s\n         B = %s%s\n", report.name_a.c_str(),
                    with_changes(report.changes_a).c_str(), report.name_b.c_str(),
                    with_changes(report.changes_b).c_str());
  if (r.method == "requests") {
    os << format_text(
        "seed %llu, common random numbers; %lld requests in A, %lld in B, %lld matched by id "
        "(%lld with identical arrivals)\n",
        static_cast<unsigned long long>(r.seeds.front()), static_cast<long long>(r.num_requests_a),
        static_cast<long long>(r.num_requests_b), static_cast<long long>(r.num_matched),
        static_cast<long long>(r.num_identical));
    os << format_text("%.0f%% intervals: paired bootstrap over requests, %d resamples\n\n",
                      100 * opt.confidence, opt.num_resamples);
  } else {
    os << format_text("seeds %llu..%llu (A and B share each seed)\n",
                      static_cast<unsigned long long>(r.seeds.front()),
                      static_cast<unsigned long long>(r.seeds.back()));
    os << format_text(
        "%.0f%% intervals: bootstrap over %zu replications, %d resamples; A and B are "
        "means over replications\n\n",
        100 * opt.confidence, r.seeds.size(), opt.num_resamples);
  }
}

}  // namespace

CompareReport compare(const CompareRequest& request) {
  check_request(request);
  // Each side: the file, less the dropped keys, with the overrides (policy settings resolved).
  Scenario a = load_template(request.a).scenario;
  Scenario b = load_template(request.b).scenario;
  if (request.duration_s) a.run.duration_s = b.run.duration_s = *request.duration_s;
  CompareReport report;
  report.name_a = request.a.name();
  report.name_b = request.b.name();
  report.changes_a = changes_text(request.a);
  report.changes_b = changes_text(request.b);
  study::CompareOptions& opt = report.options;
  opt.seed = request.seed ? static_cast<uint64_t>(*request.seed) : a.run.seed;
  if (request.replications) opt.num_replications = static_cast<int32_t>(*request.replications);
  if (request.resamples) opt.num_resamples = static_cast<int32_t>(*request.resamples);
  if (request.confidence) opt.confidence = *request.confidence;
  opt.num_threads =
      request.threads ? static_cast<int32_t>(*request.threads) : study::default_num_threads();
  opt.progress = request.progress;
  report.result = study::compare_scenarios(a, b, opt);
  opt.progress = nullptr;
  return report;
}

nlohmann::json compare_json(const CompareReport& report) {
  const study::CompareResult& r = report.result;
  nlohmann::json j;
  j["a"] = report.name_a;
  j["b"] = report.name_b;
  j["changes"] = {{"a", report.changes_a}, {"b", report.changes_b}};
  j["method"] = r.method;
  j["seeds"] = r.seeds;
  j["resamples"] = report.options.num_resamples;
  j["confidence"] = report.options.confidence;
  if (r.method == "requests") {
    j["requests"] = {{"a", r.num_requests_a},
                     {"b", r.num_requests_b},
                     {"matched", r.num_matched},
                     {"identical_arrivals", r.num_identical}};
  }
  j["metrics"] = nlohmann::json::array();
  for (const auto& m : r.metrics) j["metrics"].push_back(metric_json(m));
  j["actions"] = nlohmann::json::array();
  for (const auto& m : r.actions) j["actions"].push_back(metric_json(m));
  j["mechanisms"] = nlohmann::json::array();
  for (const auto& m : r.mechanisms) j["mechanisms"].push_back(metric_json(m));
  j["digests"] = {{"a", r.digests_a}, {"b", r.digests_b}};
  j["conservation_ok"] = r.conservation_ok;
  j["identical"] = r.identical;
  j["not_converged"] = {{"a", r.num_not_converged_a}, {"b", r.num_not_converged_b}};
  return j;
}

void write_compare_text(std::ostream& os, const CompareReport& report) {
  const study::CompareResult& r = report.result;
  write_header(os, report);
  if (r.num_not_converged_a + r.num_not_converged_b > 0) {
    os << format_text(
        "  NOT CONVERGED: %d of A's and %d of B's %zu runs (first: %s); their figures are of a "
        "transient (docs/outputs.md, \"Steady state\")\n",
        r.num_not_converged_a, r.num_not_converged_b, r.seeds.size(),
        r.not_converged_reason.c_str());
  }
  if (r.identical) {
    os << "  A and B are identical runs (the same events for every seed): every difference is 0\n";
  }
  os << format_text("  %-26s %-10s %12s %12s %12s %9s   %s\n", "metric", "unit", "A", "B", "B - A",
                    "B/A - 1", "interval of B - A");
  for (const auto& m : r.metrics) write_metric(os, m);
  if (!r.actions.empty()) {
    os << "\n  policy actions\n";
    for (const auto& m : r.actions) write_metric(os, m);
  }
  if (!r.mechanisms.empty()) {
    os << "\n  mechanisms (run totals)\n";
    for (const auto& m : r.mechanisms) write_metric(os, m);
  }
  os << "\n  * the interval excludes 0; n/a: no data (e.g. TPOT when nothing completed), or no\n"
        "    interval (resamples that do not vary: give --replications N >= 2); slo_attainment is\n"
        "    met / decided requests (docs/outputs.md)\n";
  if (!r.conservation_ok) os << "  CONSERVATION BROKEN in at least one run\n";
}

}  // namespace moesim::sim::api
