#include "sim/api/diagnosis_writers.h"

#include "sim/metrics/figure_text.h"

namespace moesim::sim::api {

nlohmann::json diagnosis_report_json(const study::Diagnosis& d) {
  nlohmann::json j;
  j["verdict"] = d.verdict();
  j["num_requests"] = d.num_requests;
  j["num_context_too_long"] = d.num_context_too_long;
  j["num_kv_capacity"] = d.num_kv_capacity;
  j["longest_prompt_tokens"] = d.longest_prompt_tokens;
  j["longest_prefill_ms"] = clean_double(d.longest_prefill_ms);
  j["where"] = d.where;
  j["findings"] = nlohmann::json::array();
  for (const auto& f : d.findings) {
    const double fraction =
        f.num_counted > 0 ? static_cast<double>(f.num_affected) / static_cast<double>(f.num_counted)
                          : 0.0;
    j["findings"].push_back({{"limit", f.limit},
                             {"num_affected", f.num_affected},
                             {"num_counted", f.num_counted},
                             {"fraction", clean_double(fraction)},
                             {"infeasible", f.infeasible},
                             {"text", f.text}});
  }
  return j;
}

std::string diagnosis_findings_text(const study::Diagnosis& d, const std::string& indent) {
  std::string out;
  for (const auto& f : d.findings) out += indent + f.limit + ": " + f.text + "\n";
  return out;
}

}  // namespace moesim::sim::api
