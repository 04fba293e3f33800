// What `moesim-engine serve` writes: one row per request in the simulator's requests.csv schema
// (docs/outputs.md, "requests.csv": same columns, same meanings, so `moesim validate --serving`
// reads both sides with one reader) and one JSON line per executed step (docs/engine.md,
// "Serving"). Times are int64 ns from the serve run's start, the request trace's time 0.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace moesim::engine::serve {

struct RequestRecord {
  int64_t request_id = 0;
  int64_t session_id = -1;
  int64_t turn_idx = 0;
  int64_t replica = -1;  // -1 until routed
  std::string domain;
  std::string outcome = "in_flight";  // "completed", "rejected" or "in_flight"
  std::string reject_reason;          // context_too_long, kv_capacity, queue_full, a policy's
  int64_t arrival_ns = 0;
  int64_t first_scheduled_ns = -1;
  int64_t first_token_ns = -1;
  int64_t done_ns = -1;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
};

// The header line of requests.csv.
void write_requests_csv_header(std::ostream& os);
// One row; ms columns as the simulator computes them (empty when not reached; tpot needs two
// generated tokens).
void write_requests_csv_row(std::ostream& os, const RequestRecord& r);

// One executed step of one replica.
struct StepSequenceRecord {
  int64_t request_id = 0;
  int32_t rank = 0;
  bool prefill = false;
  int64_t new_tokens = 0;
  int64_t context_tokens = 0;
  bool emits_token = false;
};
struct StepLogRecord {
  int64_t step_idx = 0;  // per replica, from 0
  int64_t replica = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::vector<StepSequenceRecord> sequences;
  std::vector<int64_t> preempted;
};
// {"record":"step","step":S,"replica":R,"start_ns":..,"end_ns":..,
//  "sequences":[[request_id, rank, "prefill"|"decode", new_tokens, context_tokens, emits], ...],
//  "preempted":[ids]} on one line.
void write_step_log_record(std::ostream& os, const StepLogRecord& r);

}  // namespace moesim::engine::serve
