#include "engine/serve/serve_records.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace moesim::engine::serve {

namespace {

// ns as ms with 6 decimals, nothing when negative (not reached).
void ms(std::ostream& os, double ns) {
  if (ns < 0) return;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", ns / 1e6);
  os << buf;
}

}  // namespace

void write_requests_csv_header(std::ostream& os) {
  os << "request_id,session_id,turn_idx,attempt_idx,replica,domain,outcome,reject_reason,"
        "arrival_ns,first_scheduled_ns,first_token_ns,done_ns,prompt_tokens,output_tokens,"
        "generated_tokens,cached_prompt_tokens,preemptions,queueing_ms,ttft_ms,tpot_ms,e2e_ms,"
        "loaded_prompt_tokens,kv_load_ms,prefill_ms\n";
}

void write_requests_csv_row(std::ostream& os, const RequestRecord& r) {
  os << r.request_id << ',' << r.session_id << ',' << r.turn_idx << ",0," << r.replica << ','
     << r.domain << ',' << r.outcome << ',' << r.reject_reason << ',' << r.arrival_ns << ','
     << r.first_scheduled_ns << ',' << r.first_token_ns << ',' << r.done_ns << ','
     << r.prompt_tokens << ',' << r.output_tokens << ',' << r.generated_tokens << ",0,"
     << r.preemptions << ',';
  const bool scheduled = r.first_scheduled_ns >= 0;
  ms(os, scheduled ? static_cast<double>(r.first_scheduled_ns - r.arrival_ns) : -1.0);
  os << ',';
  ms(os, r.first_token_ns >= 0 ? static_cast<double>(r.first_token_ns - r.arrival_ns) : -1.0);
  os << ',';
  ms(os, r.done_ns >= 0 && r.generated_tokens >= 2
             ? static_cast<double>(r.done_ns - r.first_token_ns) /
                   static_cast<double>(r.generated_tokens - 1)
             : -1.0);
  os << ',';
  ms(os, r.done_ns >= 0 ? static_cast<double>(r.done_ns - r.arrival_ns) : -1.0);
  os << ",0,";
  ms(os, scheduled ? 0.0 : -1.0);
  os << ',';
  ms(os,
     r.first_token_ns >= 0 ? static_cast<double>(r.first_token_ns - r.first_scheduled_ns) : -1.0);
  os << '\n';
}

void write_step_log_record(std::ostream& os, const StepLogRecord& r) {
  nlohmann::ordered_json j;
  j["record"] = "step";
  j["step"] = r.step_idx;
  j["replica"] = r.replica;
  j["start_ns"] = r.start_ns;
  j["end_ns"] = r.end_ns;
  nlohmann::json seqs = nlohmann::json::array();
  for (const StepSequenceRecord& s : r.sequences) {
    seqs.push_back({s.request_id, s.rank, s.prefill ? "prefill" : "decode", s.new_tokens,
                    s.context_tokens, s.emits_token});
  }
  j["sequences"] = std::move(seqs);
  j["preempted"] = r.preempted;
  os << j.dump() << '\n';
}

}  // namespace moesim::engine::serve
