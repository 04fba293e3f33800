#include "sim/calibration/validation_writers.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moesim::sim {
namespace {

std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100.0 * x);
  return b;
}

std::string us(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", 1e6 * s);
  return b;
}

std::string num(double x, const char* fmt = "%.3g") {
  char b[48];
  std::snprintf(b, sizeof b, fmt, x);
  return b;
}

nlohmann::json stats_json(const ErrorStats& e) {
  return {{"num_samples", e.num_samples},
          {"mape", e.mape},
          {"mean_rel_error", e.mean_rel_error},
          {"p50_abs_rel_error", e.p50_abs_rel_error},
          {"p99_abs_rel_error", e.p99_abs_rel_error},
          {"p50_abs_error_s", e.p50_abs_error_s},
          {"p99_abs_error_s", e.p99_abs_error_s},
          {"pearson_r", e.pearson_r},
          {"measured_sum_s", e.measured_sum},
          {"simulated_sum_s", e.simulated_sum}};
}

struct Row {
  std::string name;
  const ErrorStats* e;
};

std::vector<Row> all_rows(const ValidationReport& r) {
  std::vector<Row> rows;
  for (const auto& [op, e] : r.by_op) rows.push_back({"op " + op, &e});
  for (int p = 0; p < kNumPhases; ++p) {
    if (r.by_phase[p].num_samples > 0) {
      rows.push_back({std::string("phase ") + phase_name(static_cast<Phase>(p)), &r.by_phase[p]});
    }
  }
  rows.push_back({"step compute (per GPU)", &r.per_step});
  rows.push_back({"step duration (composed)", &r.step_duration});
  return rows;
}

}  // namespace

void write_validation_text(std::ostream& os, const ValidationReport& r) {
  os << "validation: " << r.measurement_file << " with profile " << r.profile_name << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-28s %6s %8s %8s %8s %10s %10s %7s %7s\n", "what", "n",
                "MAPE", "p50|rel|", "p99|rel|", "p50|abs|us", "p99|abs|us", "bias", "r");
  os << line;
  for (const Row& row : all_rows(r)) {
    const ErrorStats& e = *row.e;
    std::snprintf(line, sizeof line, "  %-28s %6lld %8s %8s %8s %10s %10s %7s %7.3f\n",
                  row.name.c_str(), static_cast<long long>(e.num_samples), pct(e.mape).c_str(),
                  pct(e.p50_abs_rel_error).c_str(), pct(e.p99_abs_rel_error).c_str(),
                  us(e.p50_abs_error_s).c_str(), us(e.p99_abs_error_s).c_str(),
                  pct(e.mean_rel_error).c_str(), e.pearson_r);
    os << line;
  }
  os << "  end to end (simulated vs engine-measured compute; collectives simulated; lm_head "
     << (r.num_lm_head_measured > 0 ? "measured" : "simulated") << "):\n";
  if (!r.end_to_end_note.empty()) os << "    " << r.end_to_end_note << "\n";
  if (!r.overlap_note.empty()) os << "    " << r.overlap_note << "\n";
  for (const EndToEndMetric& m : r.end_to_end) {
    double rel = m.measured != 0 ? (m.simulated - m.measured) / m.measured : 0.0;
    std::snprintf(line, sizeof line, "    %-22s simulated %12.4g  measured %12.4g  error %7s\n",
                  m.name.c_str(), m.simulated, m.measured, pct(rel).c_str());
    os << line;
  }
  os << "  op records without a fit: " << r.num_ops_without_fit
     << ", priced outside their fit's range: " << r.num_ops_out_of_range << "\n";
  os << "  re-simulation: out-of-range cost queries " << r.num_out_of_range_queries
     << ", lm_head priced by proxy " << r.num_proxy_queries << ", composed-vs-StepModel step "
     << us(r.max_composition_error_s) << " us max, MoE layers whose combine bytes differ from the "
     << "recording " << r.num_routing_mismatches << " of " << r.num_moe_layers_checked << "\n";
}

void write_validation_markdown(std::ostream& os, const ValidationReport& r) {
  os << "# Validation report\n\n"
     << "- measurements: `" << r.measurement_file << "`\n- step trace: `" << r.trace_file
     << "`\n- profile: `" << r.profile_name << "`\n\n"
     << "Relative error = (simulated - measured) / measured; bias is its mean.\n\n"
     << "| what | n | MAPE | p50 abs rel | p99 abs rel | p50 abs (us) | p99 abs (us) | bias | "
        "Pearson r |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& row : all_rows(r)) {
    const ErrorStats& e = *row.e;
    os << "| " << row.name << " | " << e.num_samples << " | " << pct(e.mape) << " | "
       << pct(e.p50_abs_rel_error) << " | " << pct(e.p99_abs_rel_error) << " | "
       << us(e.p50_abs_error_s) << " | " << us(e.p99_abs_error_s) << " | " << pct(e.mean_rel_error)
       << " | " << num(e.pearson_r, "%.3f") << " |\n";
  }
  os << "\n## End to end\n\nCollectives are not timed by a single-rank replay; both columns take "
        "them from the simulation. The output head (lm_head) is "
     << (r.num_lm_head_measured > 0
             ? "measured (per-step compute and durations include it on both sides)"
             : "not in the measurements; both columns take it from the simulation")
     << ".\n\n";
  if (!r.end_to_end_note.empty()) os << r.end_to_end_note << "\n\n";
  if (!r.overlap_note.empty()) os << r.overlap_note << ".\n\n";
  os << "| metric | simulated | measured | error |\n|---|---|---|---|\n";
  for (const EndToEndMetric& m : r.end_to_end) {
    double rel = m.measured != 0 ? (m.simulated - m.measured) / m.measured : 0.0;
    os << "| " << m.name << " | " << num(m.simulated, "%.4g") << " | " << num(m.measured, "%.4g")
       << " | " << pct(rel) << " |\n";
  }
  os << "\nOp records without a fit: " << r.num_ops_without_fit
     << "; priced outside their fit's range: " << r.num_ops_out_of_range
     << ". Re-simulation: out-of-range cost queries " << r.num_out_of_range_queries
     << ", lm_head priced by proxy " << r.num_proxy_queries
     << "; MoE layers whose combine bytes differ from the recording " << r.num_routing_mismatches
     << " of " << r.num_moe_layers_checked << ".\n";
}

void write_validation_json(std::ostream& os, const ValidationReport& r) {
  nlohmann::json j;
  j["measurements"] = r.measurement_file;
  j["trace"] = r.trace_file;
  j["profile"] = r.profile_name;
  for (const auto& [op, e] : r.by_op) j["per_op"][op] = stats_json(e);
  for (int p = 0; p < kNumPhases; ++p) {
    j["per_phase"][phase_name(static_cast<Phase>(p))] = stats_json(r.by_phase[p]);
  }
  j["per_step_compute"] = stats_json(r.per_step);
  j["step_duration"] = stats_json(r.step_duration);
  j["end_to_end"] = nlohmann::json::object();
  for (const EndToEndMetric& m : r.end_to_end) {
    j["end_to_end"][m.name] = {{"simulated", m.simulated}, {"measured", m.measured}};
  }
  if (!r.end_to_end_note.empty()) j["end_to_end_note"] = r.end_to_end_note;
  if (!r.overlap_note.empty()) j["overlap_note"] = r.overlap_note;
  j["num_ops_without_fit"] = r.num_ops_without_fit;
  j["num_ops_out_of_range"] = r.num_ops_out_of_range;
  j["num_out_of_range_queries"] = r.num_out_of_range_queries;
  j["num_proxy_queries"] = r.num_proxy_queries;
  j["num_moe_layers_checked"] = r.num_moe_layers_checked;
  j["num_routing_mismatches"] = r.num_routing_mismatches;
  j["num_lm_head_measured"] = r.num_lm_head_measured;
  j["max_composition_error_s"] = r.max_composition_error_s;
  os << j.dump(2) << "\n";
}

void write_ops_csv(std::ostream& os, const ValidationReport& r) {
  os << "step,gpu,layer,op,dtype,tokens,flops,bytes,measured_s,simulated_s,in_range\n";
  for (const OpComparison& c : r.ops) {
    os << c.step << ',' << c.gpu << ',' << c.layer_idx << ',' << c.op << ',' << c.dtype << ','
       << c.tokens << ',' << num(c.flops, "%.6g") << ',' << num(c.bytes, "%.6g") << ','
       << num(c.measured_s, "%.6g") << ',' << num(c.simulated_s, "%.6g") << ','
       << (c.in_range ? 1 : 0) << '\n';
  }
}

void write_steps_csv(std::ostream& os, const ValidationReport& r) {
  os << "step,replica,gpu,measured_compute_s,simulated_compute_s\n";
  for (const StepComparison& c : r.steps) {
    os << c.step << ',' << c.replica << ',' << c.gpu << ',' << num(c.measured_compute_s, "%.6g")
       << ',' << num(c.simulated_compute_s, "%.6g") << '\n';
  }
}

void write_phases_csv(std::ostream& os, const ValidationReport& r) {
  os << "step,gpu,layer,phase,measured_s,simulated_s\n";
  for (const PhaseComparison& c : r.phases) {
    os << c.step << ',' << c.gpu << ',' << c.layer_idx << ',' << phase_name(c.phase) << ','
       << num(c.measured_s, "%.6g") << ',' << num(c.simulated_s, "%.6g") << '\n';
  }
}

}  // namespace moesim::sim
