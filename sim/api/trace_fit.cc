#include "sim/api/trace_fit.h"

#include <algorithm>
#include <filesystem>

#include "sim/api/option_domain.h"
#include "sim/api/text_format.h"
#include "sim/api/usage_error.h"
#include "sim/core/horizon.h"
#include "sim/workload/azure_trace.h"
#include "sim/workload/mooncake_trace.h"

namespace moesim::sim::api {
namespace {

std::string kind_of(const TraceFitRequest& r) {
  if (r.kind) {
    if (*r.kind != "mooncake" && *r.kind != "azure") {
      throw UsageError{"--kind: unknown kind '" + *r.kind + "' (valid: mooncake, azure)"};
    }
    return *r.kind;
  }
  const std::string ext = std::filesystem::path(r.path).extension().string();
  if (ext == ".jsonl") return "mooncake";
  if (ext == ".csv") return "azure";
  throw UsageError{"cannot tell the trace's kind from '" + r.path +
                   "' (not .jsonl or .csv): give --kind mooncake or --kind azure"};
}

nlohmann::json or_null(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json stats_json(const TraceSampleStats& s) {
  return {{"requests", s.num_requests},
          {"rate_per_s", s.rate_per_s},
          {"gap_cv", s.gap_cv},
          {"gap_lag1_autocorrelation", s.gap_lag1},
          {"mean_prompt_tokens", s.mean_prompt_tokens},
          {"mean_output_tokens", s.mean_output_tokens},
          {"log_length_correlation", s.log_length_corr},
          {"block_hit_rate", or_null(s.block_hit_rate)}};
}

std::string pct_or_na(const std::optional<double>& v) {
  return v ? format_text("%.1f%%", 100 * *v) : std::string("n/a");
}

}  // namespace

TraceFitResult trace_fit(const TraceFitRequest& request) {
  TraceFitResult out;
  out.request = request;
  out.kind = kind_of(request);
  // Trace time within the simulation's horizon (100 years, sim/core/horizon.h).
  check_option_in("--start-s", request.start_s, 0.0, kHorizonS, "seconds of trace time");
  if (request.end_s) {
    check_option_in("--end-s", *request.end_s, 0.0, kHorizonS, "seconds of trace time");
    if (!(*request.end_s > request.start_s)) {
      throw UsageError{"--end-s must be greater than --start-s"};
    }
  }
  if (request.max_requests && *request.max_requests < 1) {
    throw UsageError{"--max-requests must be >= 1"};
  }
  const std::vector<TraceRecord> rows =
      out.kind == "mooncake" ? read_mooncake_trace(request.path) : read_azure_trace(request.path);
  const TraceWindow w =
      select_trace_window(rows, request.start_s, request.end_s, request.max_requests);
  if (w.num_rows() == 0) throw UsageError{"the window selects no rows of " + request.path};
  if (w.period_ns <= 0) {
    throw UsageError{"the window's " + std::to_string(w.num_rows()) +
                     " row(s) give no lap length: give --end-s"};
  }
  out.report = fit_trace(rows, w, request.seed);
  return out;
}

nlohmann::json trace_fit_json(const TraceFitResult& result) {
  const TraceFitReport& r = result.report;
  const TraceModel& m = r.model;
  const bool lattice = m.arrival.kind == TraceArrivalFit::Kind::kLattice;
  nlohmann::json arrival = {{"process", lattice ? "lattice" : "renewal"},
                            {"batches_per_s", m.arrival.batches_per_s()}};
  if (lattice) {
    arrival["tick_s"] = to_seconds(m.arrival.tick_ns);
  } else {
    arrival["gap_cv"] = m.arrival.gap_cv();
  }
  return {{"trace", result.request.path},
          {"kind", result.kind},
          {"window",
           {{"start_s", result.request.start_s},
            {"end_s", result.request.end_s ? nlohmann::json(*result.request.end_s) : nullptr},
            {"rows", r.window.num_rows()},
            {"lap_s", to_seconds(r.window.period_ns)},
            {"rate_per_s", r.window.rate_per_s()}}},
          {"model",
           {{"rate_per_s", m.rate_per_s()},
            {"sessions", m.sessions.size()},
            {"mean_turns_per_session", m.mean_turns_per_session()},
            {"max_session_span_s", to_seconds(m.max_session_span_ns)},
            {"shared_hash_ids", m.num_shared_ids},
            {"arrival", arrival},
            {"diurnal_factors",
             m.diurnal.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.diurnal.factors)}}},
          {"goodness_of_fit",
           {{"seed", result.request.seed},
            {"laps", r.num_laps},
            {"ks_interarrival", r.ks_gap},
            {"ks_prompt_tokens", r.ks_prompt},
            {"ks_output_tokens", r.ks_output},
            {"trace", stats_json(r.trace)},
            {"model", stats_json(r.model_sample)}}},
          {"loop",
           {{"block_hit_rate", or_null(r.loop_block_hit_rate)},
            {"block_hit_rate_all_ids_kept", or_null(r.loop_all_ids_kept_block_hit_rate)}}}};
}

void write_trace_fit_text(std::ostream& os, const TraceFitResult& result) {
  const TraceFitReport& r = result.report;
  const TraceModel& m = r.model;
  os << "trace " << result.request.path << " (" << result.kind << ")\n";
  os << format_text("  window    [%g, %s) s: %zu rows, lap %.3f s, %.4g req/s\n",
                    result.request.start_s,
                    result.request.end_s ? format_text("%g", *result.request.end_s).c_str() : "end",
                    r.window.num_rows(), to_seconds(r.window.period_ns), r.window.rate_per_s());
  os << format_text(
      "  model     %zu sessions, %.3f turns each (longest span %.1f s), %lld shared "
      "hash ids, %.4g req/s\n",
      m.sessions.size(), m.mean_turns_per_session(), to_seconds(m.max_session_span_ns),
      static_cast<long long>(m.num_shared_ids), m.rate_per_s());
  if (m.arrival.kind == TraceArrivalFit::Kind::kLattice) {
    os << format_text(
        "  arrivals  lattice: session starts on %.4g s ticks, per-tick counts "
        "resampled\n",
        to_seconds(m.arrival.tick_ns));
  } else {
    os << format_text(
        "  arrivals  renewal: %zu start-batch gaps resampled (cv %.3g), %.4g "
        "batches/s\n",
        m.arrival.gaps_ns.size(), m.arrival.gap_cv(), m.arrival.batches_per_s());
  }
  if (m.diurnal.empty()) {
    os << format_text("  diurnal   none: the window spans %.3g h, under a day\n",
                      to_seconds(r.window.period_ns) / 3600);
  } else {
    const auto [lo, hi] = std::minmax_element(m.diurnal.factors.begin(), m.diurnal.factors.end());
    os << format_text(
        "  diurnal   hourly start-rate factors from the window's start (mean 1): lowest %.3g in "
        "hour %td, highest %.3g in hour %td; the start process is fitted on operational time\n",
        *lo, lo - m.diurnal.factors.begin(), *hi, hi - m.diurnal.factors.begin());
  }
  os << format_text("\ngoodness of fit (model: %lld requests, %lld laps' worth, seed %llu)\n",
                    static_cast<long long>(r.model_sample.num_requests),
                    static_cast<long long>(r.num_laps),
                    static_cast<unsigned long long>(result.request.seed));
  os << format_text("  KS distance   inter-arrival %.3f, prompt tokens %.3f, output tokens %.3f\n",
                    r.ks_gap, r.ks_prompt, r.ks_output);
  os << "                    trace      model\n";
  auto row = [&os](const char* name, const char* f, double a, double b) {
    os << format_text("  %-16s", name) << format_text(f, a) << "  " << format_text(f, b) << "\n";
  };
  row("req/s", "%9.4g", r.trace.rate_per_s, r.model_sample.rate_per_s);
  row("gap cv", "%9.3f", r.trace.gap_cv, r.model_sample.gap_cv);
  row("gap lag-1", "%9.3f", r.trace.gap_lag1, r.model_sample.gap_lag1);
  row("mean prompt", "%9.1f", r.trace.mean_prompt_tokens, r.model_sample.mean_prompt_tokens);
  row("mean output", "%9.1f", r.trace.mean_output_tokens, r.model_sample.mean_output_tokens);
  row("ln corr", "%9.3f", r.trace.log_length_corr, r.model_sample.log_length_corr);
  os << format_text("  %-16s%9s  %9s\n", "block hits", pct_or_na(r.trace.block_hit_rate).c_str(),
                    pct_or_na(r.model_sample.block_hit_rate).c_str());
  os << "\nloop over " << r.num_laps << " laps: block hits " << pct_or_na(r.loop_block_hit_rate)
     << " (fresh private ids per lap), " << pct_or_na(r.loop_all_ids_kept_block_hit_rate)
     << " if every id were kept\n";
}

}  // namespace moesim::sim::api
