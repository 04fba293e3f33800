// Reading request traces (schema "moesim.request_trace.v1", written by `moesim run
// --export-requests FILE`) for `moesim-engine serve`: the step trace's header fields (parsed by the
// same code, engine/trace_header.h) plus the resolved scheduler settings, router, pools,
// admission policies, routing statistics, SLO limits and run duration; then one record per
// arrival. Strict like the step-trace reader: every error is an InputError "FILE:LINE: FIELD:
// reason", unknown keys are errors, and a trace that lists unsupported policies (ones the engine
// cannot run: EPLB, replication, ...) is refused naming them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/serve/admission.h"
#include "engine/serve/scheduler.h"
#include "engine/trace_header.h"

namespace moesim::engine::serve {

inline constexpr std::string_view kRequestTraceSchema = "moesim.request_trace.v1";

// The header's "scheduler": the values the simulator ran with (every key required).
struct TraceSchedulerSettings {
  int64_t max_seqs = 0;
  int64_t max_batch_tokens_per_gpu = 0;
  int64_t max_step_tokens = -1;  // -1: no cap
  bool chunked_prefill = true;
  int64_t kv_block_tokens = 0;
  int64_t kv_blocks_per_rank = 0;        // one attention rank's KV pool
  std::string preemption = "recompute";  // the only mode the engine (and simulator) runs
  int64_t max_queued_requests = -1;      // -1: no cap
  int64_t max_context_tokens = 0;
  bool prefix_caching = false;  // the engine has no prefix cache: it computes every prompt token
  int64_t prefix_block_tokens = 512;  // tokens per prefix_blocks hash (optional, default 512)
};

struct TraceRequest {
  int64_t line = 0;  // line of the record (1-based)
  int64_t request_id = 0;
  int64_t arrival_ns = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t session_id = -1;      // -1: an independent request (the default)
  int64_t turn_idx = 0;         // default 0
  std::string domain = "chat";  // code, math, chat or multilingual (default chat)
  std::vector<uint64_t> prefix_blocks;
};

struct RequestTrace {
  std::string file;
  TraceHeader header;
  TraceSchedulerSettings scheduler;
  // Router, pools and the admission policies present (queue isolation, concurrency cap,
  // long-context cap); checked together by ServeFront's rules.
  AdmissionConfig admission;
  // expert_share[m][e]: share of the routed selections of the m-th MoE layer that went to e.
  std::vector<std::vector<double>> expert_share;
  std::optional<double> slo_ttft_ms;
  std::optional<double> slo_tpot_ms;
  int64_t duration_ns = 0;
  std::vector<TraceRequest> requests;  // file order: arrival_ns non-decreasing

  // Attention ranks of each replica: its GPUs with "dp" attention, GPUs / attention_tp with "tp".
  std::vector<int64_t> ranks_per_replica() const;
  // The scheduler settings as a SchedulerConfig (num_ranks 1: ServeFront sets each replica's).
  SchedulerConfig scheduler_config() const;
};

// The arrival the ServeFront takes for `request`.
Arrival arrival_of(const TraceRequest& request);

// Reads and validates a request trace. Throws InputError; a missing file is "FILE: cannot open".
RequestTrace read_request_trace(const std::string& path);
// Parses trace text; `file_name` is used in messages.
RequestTrace parse_request_trace(std::string_view text, const std::string& file_name);

}  // namespace moesim::engine::serve
