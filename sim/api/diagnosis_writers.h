// The infeasibility diagnosis (sim/study/infeasibility.h) as people and programs read it: the
// JSON object of `moesim search --json` and `moesim run --diagnose --json`, and the text lines
// both commands print.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sim/study/infeasibility.h"

namespace moesim::sim::api {

// {verdict, num_requests, num_context_too_long, num_kv_capacity, longest_prompt_tokens,
//  longest_prefill_ms, where, findings: [{limit, num_affected, num_counted, fraction,
//  infeasible, text}]}. Precondition: d.done.
nlohmann::json diagnosis_report_json(const study::Diagnosis& d);

// One line per finding, "<indent><limit>: <text>\n"; "" when there is none.
std::string diagnosis_findings_text(const study::Diagnosis& d, const std::string& indent);

}  // namespace moesim::sim::api
