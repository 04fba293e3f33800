// The workload module's public interface: a WorkloadGenerator turns a WorkloadSpec into requests.
//
// Open-loop requests (synthetic requests, trace rows, first turns of agent sessions) come from
// next() in arrival order. Later turns of agent sessions are closed-loop: the serving layer calls
// on_turn_completed() when a session's request finishes and gets the session's next request,
// which arrives a tool wait later. All randomness comes from the one RngStream given to the
// constructor (e.g. sim.rng("workload")), drawn in a fixed order: the open-loop sequence is the
// same whatever the serving layer does, and on_turn_completed() draws nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/core/distributions.h"
#include "sim/core/ids.h"
#include "sim/core/rng.h"
#include "sim/core/time.h"
#include "sim/workload/agent_session.h"
#include "sim/workload/arrival_process.h"
#include "sim/workload/request.h"
#include "sim/workload/trace_model.h"
#include "sim/workload/trace_window.h"
#include "sim/workload/value_distribution.h"
#include "sim/workload/workload_spec.h"

namespace moesim::sim {

struct WorkloadStats {
  int64_t num_requests = 0;   // requests produced, re-issues included
  int64_t num_sessions = 0;   // agent sessions started
  int64_t num_rollbacks = 0;  // re-issues of failed agent turns
  // Agent sessions that ended, by reason (see AgentSessionEnd), and by abandon_session().
  int64_t num_sessions_completed = 0;
  int64_t num_sessions_context_full = 0;
  int64_t num_sessions_rollback_limit = 0;
  int64_t num_sessions_abandoned = 0;
};

class WorkloadGenerator {
 public:
  // `rng` must outlive the generator. The spec is validated (parse_workload); trace kinds need
  // spec.trace.records.
  WorkloadGenerator(WorkloadSpec spec, RngStream& rng);
  WorkloadGenerator(const WorkloadGenerator&) = delete;
  WorkloadGenerator& operator=(const WorkloadGenerator&) = delete;

  // The next open-loop request, arrival times non-decreasing; nullopt once the workload's
  // request count, session count, duration or trace window is exhausted (and ever after).
  std::optional<Request> next();
  // Drains next(): every remaining open-loop request (for agents: first turns only).
  // Precondition (checked): the workload ends (a trace loop or model needs duration_s).
  std::vector<Request> generate_all();

  // Called by the serving layer when the request of `session` that it was last given completes
  // at `now`. A request trace replays its session turns open-loop: nothing follows, nullopt.
  // Returns the session's next request (the next turn, or a re-issue of a failed turn after a
  // rollback), arriving at now + tool wait; nullopt when the session has ended. Call exactly once
  // per request of the session. Precondition (checked): the session is active.
  std::optional<Request> on_turn_completed(SessionId session, SimTime now);
  // Ends an active session early (e.g. its request was rejected). Precondition (checked): active
  // (a request trace's sessions: a no-op).
  void abandon_session(SessionId session);

  size_t num_active_sessions() const { return sessions_.size(); }
  const WorkloadStats& stats() const { return stats_; }
  const WorkloadSpec& spec() const { return spec_; }

 private:
  struct ActiveSession {
    AgentSessionPlan plan;
    int32_t turn_idx = 0;
    int32_t attempt_idx = 0;
    int64_t prompt_tokens = 0;
    std::vector<uint64_t> block_hashes;  // of the current turn's prompt
  };

  Domain draw_domain();
  // Appends fresh block hashes to `hashes` until it covers `prompt_tokens`.
  void extend_hashes(std::vector<uint64_t>& hashes, int64_t prompt_tokens);
  // Gives an open-loop request its prompt's block hashes: none over spec_.max_request_tokens.
  void hash_prompt(Request& r);
  Request new_request(SimTime arrival_ns, Domain domain);
  Request session_request(SessionId session, const ActiveSession& s, SimTime arrival_ns,
                          int64_t reused_prefix_tokens);
  void end_session(std::map<int32_t, ActiveSession>::iterator it);
  std::optional<Request> next_synthetic();
  std::optional<Request> next_agent_session();
  std::optional<Request> next_trace_row();
  std::optional<Request> next_model_draw();
  std::optional<Request> next_request_trace_row();

  WorkloadSpec spec_;
  RngStream& rng_;
  std::unique_ptr<CategoricalDistribution> domain_dist_;  // null when one domain has all weight
  Domain only_domain_ = Domain::kChat;
  ArrivalProcess arrival_;
  // Synthetic.
  std::unique_ptr<ValueDistribution> prompt_tokens_;
  std::unique_ptr<ValueDistribution> output_tokens_;
  std::unique_ptr<ValueDistribution> reasoning_tokens_;
  // Agent.
  std::unique_ptr<AgentSessionPlanner> planner_;
  std::map<int32_t, ActiveSession> sessions_;  // ordered: iteration never depends on hashing
  std::vector<uint64_t> system_prompt_hashes_;
  // Trace replay: the window, the next row and the lap (loop), or the model's sampler.
  TraceWindow window_;
  size_t trace_idx_ = 0;
  int64_t lap_ = 0;
  double trace_multiplier_ = 1.0;
  std::vector<uint64_t> shared_hash_ids_;  // sorted; kept in every lap
  uint64_t lap_hash_stride_ = 0;           // lap k adds k * stride to private ids
  std::unique_ptr<TraceModelSampler> model_sampler_;

  int64_t num_open_loop_ = 0;  // requests (synthetic, trace) or sessions (agent) produced
  bool exhausted_ = false;
  int32_t next_request_id_ = 0;
  int32_t next_session_id_ = 0;
  uint64_t next_block_hash_ = 0;
  WorkloadStats stats_;
};

// The open-loop requests of `spec` arriving by `end_ns` on a generator over a fresh copy of the
// stream `stream` of `root_seed` (the same arrivals a run's generator on that stream sees, the
// open-loop sequence not depending on the serving layer; for agents, first turns only).
int64_t count_open_loop_arrivals(const WorkloadSpec& spec, uint64_t root_seed,
                                 std::string_view stream, SimTime end_ns);

}  // namespace moesim::sim
