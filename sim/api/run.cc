#include "sim/api/run.h"

#include <chrono>

#include "sim/api/diagnosis_writers.h"
#include "sim/api/text_format.h"
#include "sim/api/usage_error.h"
#include "sim/metrics/figure_text.h"
#include "sim/output/run_files.h"
#include "sim/policy/policy_registry.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/search.h"
#include "sim/study/simulate.h"

namespace moesim::sim::api {
namespace {

constexpr double kDiagnosisAttainment = 0.99;

bool bottleneck_network(const Scenario& sc) {
  return sc.network_model == "bottleneck" || sc.network_model == "bottleneck_factored";
}

void check_numbers(const RunRequest& r) {
  if (r.seed && *r.seed < 0) throw UsageError{"--seed must be >= 0"};
  // run.duration_s's range (also what keeps the run's end within the horizon).
  if (r.duration_s && !(*r.duration_s >= 1e-6 && *r.duration_s <= 1e7)) {
    throw UsageError{"--duration must be in [1e-6, 1e7] seconds (run.duration_s's range)"};
  }
  if (r.record_steps && *r.record_steps <= 0) throw UsageError{"--record-steps must be > 0"};
  if (r.record_path && r.export_requests_path && *r.record_path == *r.export_requests_path) {
    throw UsageError{"--record and --export-requests name the same file"};
  }
  if (r.fidelity_check && *r.fidelity_check <= 0) throw UsageError{"--fidelity-check must be > 0"};
  if (r.replications && (*r.replications < 1 || *r.replications > 1000)) {
    throw UsageError{"--replications must be in 1..1000"};
  }
  if (r.threads && (*r.threads < 1 || *r.threads > 4096)) {
    throw UsageError{"--threads must be in 1..4096"};
  }
}

// The further seeds of --replications, run in parallel: their summaries, in seed order.
void replicate(const RunRequest& r, RunResult& result) {
  const int64_t n = r.replications.value_or(1);
  if (n <= 1) return;
  std::vector<RunSummary> more(static_cast<size_t>(n - 1));
  const int32_t threads =
      r.threads ? static_cast<int32_t>(*r.threads) : study::default_num_threads();
  study::run_in_order<RunSummary>(
      n - 1, threads,
      [&](int64_t i) {
        return study::simulate(result.scenario, result.seed + static_cast<uint64_t>(i + 1)).summary;
      },
      [&](int64_t i, RunSummary& s) { more[static_cast<size_t>(i)] = std::move(s); });
  result.replication_seeds.push_back(result.seed);
  result.replication_summaries.push_back(result.output.summary);
  for (int64_t i = 1; i < n; ++i) {
    result.replication_seeds.push_back(result.seed + static_cast<uint64_t>(i));
    result.replication_summaries.push_back(std::move(more[static_cast<size_t>(i - 1)]));
  }
  std::vector<const RunSummary*> all;
  for (const RunSummary& s : result.replication_summaries) all.push_back(&s);
  result.replication_figures = study::figure_intervals(all);
}

int64_t num_converged(const RunResult& result) {
  int64_t n = 0;
  for (const RunSummary& s : result.replication_summaries) n += s.measurement.converged;
  return n;
}

// The request's duration and fidelity applied to the scenario.
void apply_tier(const RunRequest& r, Scenario& sc) {
  if (r.duration_s) sc.run.duration_s = *r.duration_s;
  if (r.fidelity) {
    if (*r.fidelity != "exact" && *r.fidelity != "fast")
      throw UsageError{"--fidelity wants exact or fast"};
    sc.run.fidelity = *r.fidelity == "fast" ? Fidelity::kFast : Fidelity::kExact;
    if (sc.run.fidelity == Fidelity::kFast && !bottleneck_network(sc)) {
      throw UsageError{
          "--fidelity fast times collectives with the link-load bound; network.model = \"" +
          sc.network_model + "\" needs the exact fidelity"};
    }
  }
  if (r.record_path && sc.run.fidelity == Fidelity::kFast) {
    throw UsageError{
        "--record needs the exact fidelity: the fast fidelity draws no (source, destination) "
        "routing to record (run.fidelity = \"exact\" or --fidelity exact)"};
  }
}

RunOptions run_options(const RunRequest& r, const Scenario& sc) {
  RunOptions opt;
  opt.chrome_trace = r.out_dir.has_value() && sc.outputs.chrome_trace;
  opt.trace_start_ns = from_seconds(sc.outputs.trace_start_s);
  opt.trace_end_ns = from_seconds(sc.outputs.trace_end_s);
  if (r.trace_window_s) {
    const auto [a, b] = *r.trace_window_s;
    // NaN fails every comparison; the end is bounded like outputs.trace_end_s.
    if (!(a >= 0 && b >= a && b <= 1e7)) {
      throw UsageError{"--trace-window wants 0 <= START <= END <= 1e7"};
    }
    if (!r.out_dir) {
      throw UsageError{"--trace-window needs --out DIR (the trace is DIR/trace.json)"};
    }
    opt.trace_start_ns = from_seconds(a);
    opt.trace_end_ns = from_seconds(b);
    opt.chrome_trace = true;
  }
  opt.record_steps = r.record_path.has_value();
  if (r.fidelity_check) {
    if (!bottleneck_network(sc)) {
      throw UsageError{
          "--fidelity-check runs the fast fidelity, which needs network.model = bottleneck"};
    }
    opt.fidelity_check_every = *r.fidelity_check;
  }
  opt.record_max_steps = r.record_steps ? *r.record_steps : sc.outputs.record_max_steps;
  return opt;
}

// The run's own requests, each alone on an idle replica, against the scenario's [slo]
// (sim/study/infeasibility.h): the percentile limits at p99 and attainment >= 0.99.
void diagnose(RunResult& result) {
  study::SearchSlo& slo = result.diagnosis_slo;
  slo.percentile_limits = {{"ttft_p99_ms", result.scenario.slo.ttft_ms},
                           {"tpot_p99_ms", result.scenario.slo.tpot_ms}};
  slo.min_attainment = kDiagnosisAttainment;
  result.diagnosis = study::diagnose_scenario(result.scenario, slo, result.seed);
}

// What --diagnose found, for the text summary; without it, a hint when the run missed its SLOs.
std::string diagnosis_text(const RunResult& result) {
  const std::optional<study::Diagnosis>& d = result.diagnosis;
  if (!d) {
    const SloSummary& s = result.output.summary.slo;
    if (s.num_decided == 0 || s.attainment >= kDiagnosisAttainment) return "";
    return "  SLO attainment is below " + number_text(kDiagnosisAttainment) +
           ": moesim run --diagnose says which requests no rate can serve within the limits\n";
  }
  std::string text = "  diagnosis (" + study::slo_limits_text(result.diagnosis_slo) + "; " +
                     std::to_string(d->num_requests) +
                     " requests, each alone on an idle replica: " + d->where + "):\n";
  if (d->findings.empty()) {
    return text +
           "    no request is beyond a limit on its own (isolated prefill, decode, KV fit): "
           "what the run missed, load and batching caused\n";
  }
  text += diagnosis_findings_text(*d, "    ");
  text += d->infeasible() ? "    INFEASIBLE AT ANY RATE for this deployment\n"
                          : "    feasible at some rate: the rest of what the run missed, load and "
                            "batching caused\n";
  return text;
}

}  // namespace

RunResult run(const RunRequest& request) {
  check_numbers(request);
  LoadedScenario loaded = load(request.scenario);
  RunResult result;
  result.scenario = std::move(loaded.scenario);
  const Scenario& sc = result.scenario;
  apply_tier(request, result.scenario);
  RunOptions options = run_options(request, sc);
  result.seed = request.seed ? static_cast<uint64_t>(*request.seed) : sc.run.seed;
  output::RunFiles files(sc, request.out_dir, request.record_path, options);
  if (request.export_requests_path) files.export_requests(*request.export_requests_path, options);

  auto policies = make_policies(sc);
  const auto wall_start = std::chrono::steady_clock::now();
  result.output = run_scenario(sc, options, static_cast<int64_t>(result.seed), std::move(policies));
  result.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  replicate(request, result);
  if (request.diagnose) diagnose(result);
  if (request.on_finished) request.on_finished(result);
  files.commit(result.output, result.seed, request.out_dir ? loaded.resolved_text() : std::nullopt);
  return result;
}

nlohmann::json run_json(const RunResult& result) {
  nlohmann::json j = output::summary_json(result.scenario, result.output, result.seed);
  j["wall_s"] = result.wall_s;
  if (result.diagnosis) {
    j["diagnosis"] = diagnosis_report_json(*result.diagnosis);
    j["diagnosis"]["limits"] = study::slo_limits_text(result.diagnosis_slo);
  }
  if (!result.replication_seeds.empty()) {
    nlohmann::json figures = nlohmann::json::object();
    for (const study::FigureInterval& f : result.replication_figures) {
      figures[f.name] = {
          {"unit", f.unit},
          {"runs", f.count},
          {"mean", f.count > 0 ? nlohmann::json(clean_double(f.mean)) : nullptr},
          {"interval", f.count > 1 ? nlohmann::json::array({clean_double(f.lo), clean_double(f.hi)})
                                   : nlohmann::json(nullptr)}};
    }
    j["replications"] = {{"seeds", result.replication_seeds},
                         {"converged", num_converged(result)},
                         {"figures", figures}};
  }
  return j;
}

void write_run_text(std::ostream& os, const RunResult& result) {
  output::write_summary_text(os, result.scenario, result.output, result.seed);
  const double wall_s = result.wall_s;
  os << format_text("  wall time %.2f s (%.1fx real time)\n", wall_s,
                    wall_s > 0 ? to_seconds(result.output.end_ns) / wall_s : 0.0);
  if (!result.replication_seeds.empty()) {
    const size_t n = result.replication_seeds.size();
    os << "\n  over " << n << " seeds (" << result.replication_seeds.front() << " .. "
       << result.replication_seeds.back() << "; " << num_converged(result) << " of " << n
       << " converged): mean [95% interval]\n";
    for (const study::FigureInterval& f : result.replication_figures) {
      os << format_text("    %-22s %-11s ", f.name.c_str(), f.unit.c_str());
      if (f.count == 0) {
        os << "n/a\n";
      } else if (f.count == 1) {
        os << number_text(f.mean) << " (1 run: no interval)\n";
      } else {
        os << study::interval_text(f.mean, f.lo, f.hi)
           << (f.count < static_cast<int32_t>(n) ? format_text(" (%d runs)", f.count) : "") << "\n";
      }
    }
  }
  os << diagnosis_text(result);
}

}  // namespace moesim::sim::api
