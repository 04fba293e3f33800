#include "sim/output/cost_query_summary.h"

#include <map>
#include <string>

namespace moesim::sim::output {
namespace {

void write_kinds(std::ostream& os, const char* label, const std::map<std::string, int64_t>& m) {
  if (m.empty()) return;
  os << "              " << label;
  const char* sep = "";
  for (const auto& [kind, n] : m) {
    os << sep << kind << " " << n;
    sep = ", ";
  }
  os << "\n";
}

}  // namespace

void add_cost_query_json(nlohmann::json& counters, const RunCounters& c) {
  counters["cost_by_rule_queries"] = c.cost_by_rule_queries;
  counters["cost_out_of_range_by_kind"] = nlohmann::json::object();
  for (const auto& [kind, n] : c.cost_out_of_range_by_kind) {
    counters["cost_out_of_range_by_kind"][kind] = n;
  }
  counters["cost_by_rule_by_kind"] = nlohmann::json::object();
  for (const auto& [kind, n] : c.cost_by_rule_by_kind) counters["cost_by_rule_by_kind"][kind] = n;
}

void write_cost_query_text(std::ostream& os, const CostSpec& cost, const RunCounters& c) {
  if (cost.kind == CostModelKind::kCalibrated) {
    os << "  cost model  calibrated profile " << cost.profile_path << ": "
       << c.cost_out_of_range_queries << " queries outside the fitted ranges, "
       << c.cost_by_rule_queries << " priced by a stated rule (docs/calibration.md)\n";
  } else {
    os << "  cost model  roofline (" << c.cost_out_of_range_queries
       << " queries outside a fitted range)\n";
  }
  write_kinds(os, "outside: ", c.cost_out_of_range_by_kind);
  write_kinds(os, "by rule: ", c.cost_by_rule_by_kind);
}

}  // namespace moesim::sim::output
