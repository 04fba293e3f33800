// The [workload] table of a scenario, parsed once into plain structs. Full key reference:
// docs/workload.md. Five kinds:
//   synthetic  open-loop requests: arrival process, prompt/output/reasoning length distributions;
//   agent      multi-turn agent sessions arriving open-loop; each later turn arrives a tool wait
//              after the previous one completes, with a context that grows every turn;
//   mooncake   a Mooncake JSONL trace (with prefix-block hashes);
//   azure      an Azure LLM inference CSV trace;
//   request_trace  a request trace that `moesim run --export-requests` wrote
//              (request_trace_reader.h): exactly those arrivals, replayed open-loop.
// A trace is replayed as its window (exactly), as the window looped without end, or as a model
// fitted from the window (trace_model.h); the last two sustain a rate for any duration.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/toml_source.h"
#include "sim/workload/arrival_process.h"
#include "sim/workload/request.h"
#include "sim/workload/request_trace_reader.h"
#include "sim/workload/trace_model.h"
#include "sim/workload/trace_record.h"
#include "sim/workload/value_distribution.h"

namespace moesim::sim {

enum class WorkloadKind { kSynthetic, kAgent, kMooncake, kAzure, kRequestTrace };
// "synthetic", "agent", "mooncake", "azure", "request_trace".
std::string_view workload_kind_name(WorkloadKind kind);

struct SyntheticWorkloadSpec {
  ArrivalSpec arrival;
  // Prompt tokens per request (integer >= 1).
  ValueDistributionSpec prompt_tokens = constant_distribution(1024, true);
  // Answer tokens per request (integer >= 1), excluding reasoning tokens.
  ValueDistributionSpec output_tokens = constant_distribution(128, true);
  // Reasoning tokens per request (integer >= 0), added to the output; absent means none.
  std::optional<ValueDistributionSpec> reasoning_tokens;
};

struct AgentWorkloadSpec {
  // Arrival process of sessions (each session's first turn).
  ArrivalSpec arrival;
  // Planned turns per session (integer >= 1).
  ValueDistributionSpec turns = constant_distribution(4, true);
  // System-prompt tokens shared by every session (same prefix blocks), >= 0.
  int64_t system_prompt_tokens = 0;
  // Task tokens of turn 0, after the system prompt (integer >= 1).
  ValueDistributionSpec first_input_tokens = constant_distribution(1024, true);
  // Tokens appended before each later turn: tool result or user message (integer >= 1).
  ValueDistributionSpec new_input_tokens = constant_distribution(256, true);
  // Reasoning ("thinking") tokens per turn (integer >= 0); part of the turn's output.
  ValueDistributionSpec reasoning_tokens = constant_distribution(0, true);
  // Answer tokens per turn after the reasoning, e.g. a tool call (integer >= 1).
  ValueDistributionSpec answer_tokens = constant_distribution(128, true);
  // Seconds between a turn's completion and the next request of the session (real >= 0).
  ValueDistributionSpec tool_wait_s = constant_distribution(1.0, false);
  // Whether a turn's reasoning tokens stay in the context of later turns (otherwise only its
  // answer is carried over, and the re-usable prefix ends at the previous prompt).
  bool keep_reasoning_in_context = true;
  // A session ends when its next prompt would exceed this many tokens; absent: no limit.
  std::optional<int64_t> max_context_tokens;
  // Probability that a turn fails and the harness rolls back to the snapshot taken before it
  // and re-issues it (same prompt, new output), in [0, 1).
  double rollback_probability = 0.0;
  // After this many rollbacks of one turn, a further failure ends the session, >= 0.
  int64_t max_rollbacks_per_turn = 3;
};

// How a trace workload uses its window:
//   window  the window's rows once, at their (scaled) trace times;
//   loop    the window repeated back to back, each lap with fresh ids for private hash ids;
//   model   sustained traffic drawn from a model fitted to the window (trace_model.h).
enum class TraceReplay { kWindow, kLoop, kModel };
// "window", "loop", "model".
std::string_view trace_replay_name(TraceReplay replay);

struct TraceWorkloadSpec {
  // The trace file, resolved against the scenario's directory.
  std::string path;
  TraceReplay replay = TraceReplay::kWindow;
  // Arrival times are divided by this (2 replays the trace twice as fast), > 0. Loop and model:
  // ignored when rate_per_s is given.
  double rate_multiplier = 1.0;
  // Loop and model: the mean arrival rate (requests/s) instead of rate_multiplier.
  std::optional<double> rate_per_s;
  // Window of trace time [start_s, end_s) to replay; the request at start_s arrives at 0.
  double start_s = 0.0;
  std::optional<double> end_s;
  // At most this many requests (the first ones in the window); absent: all.
  std::optional<int64_t> max_requests;
  // The rows of the file, read by parse_workload (shared, never modified).
  std::shared_ptr<const std::vector<TraceRecord>> records;
  // replay == kModel: the model fitted to the window by parse_workload.
  std::shared_ptr<const TraceModel> model;
};

// Loop and model: the mean arrival rate (requests/s) at rate multiplier 1, the window's
// (TraceWindow::rate_per_s) or the model's (TraceModel::rate_per_s). Window: 0.
double trace_base_rate_per_s(const TraceWorkloadSpec& spec);
// The factor that divides trace times (loop) or multiplies the session start rate (model):
// rate_per_s / trace_base_rate_per_s when rate_per_s is given, else rate_multiplier.
double trace_rate_multiplier(const TraceWorkloadSpec& spec);

struct WorkloadSpec {
  WorkloadKind kind = WorkloadKind::kSynthetic;
  // synthetic: stop after this many requests; agent: after this many sessions.
  std::optional<int64_t> num_requests;
  std::optional<int64_t> num_sessions;
  // synthetic, agent and trace loop / model: no request (synthetic, trace) or session (agent)
  // arrives at or after this time; absent for a trace loop or model: no end.
  std::optional<double> duration_s;
  // Relative weights of the domains (indexed by Domain), non-negative with a positive sum.
  // Default: chat only.
  std::array<double, kNumDomains> domain_mix = {0.0, 0.0, 1.0, 0.0};
  SyntheticWorkloadSpec synthetic;  // kind == kSynthetic
  AgentWorkloadSpec agent;          // kind == kAgent
  TraceWorkloadSpec trace;          // kind == kMooncake or kAzure
  // kind == kRequestTrace: the file (resolved against the scenario's directory) and its rows,
  // read by parse_workload (shared, never modified).
  std::string request_trace_path;
  std::shared_ptr<const RequestTraceFile> request_trace;
  // The model's context (set with the model by the scenario; default: no limit). A synthetic
  // request, trace row or trace-model draw whose prompt + output tokens exceed it is rejected on
  // arrival (context_too_long), like any request over the context: the generator makes no prefix
  // hashes for it, so a row of 1e18 tokens costs what a row of 5,000 does.
  int64_t max_request_tokens = INT64_MAX;
};

// Parses the [workload] table `t` (its path is e.g. "workload") and calls t.finish(). Relative
// trace paths are resolved against `base_dir`; trace files are read here, so every trace error
// surfaces as a ConfigError while loading the scenario.
WorkloadSpec parse_workload(TomlTable& t, const std::string& base_dir);

// One line naming the workload and, for traces, the replay and its rate, e.g.
// "mooncake trace conversation_trace.jsonl, loop of [0, 120) s at 12 req/s" (run summaries).
std::string workload_description(const WorkloadSpec& spec);

}  // namespace moesim::sim
