#include "sim/workload/workload_generator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "sim/core/horizon.h"

namespace moesim::sim {

WorkloadGenerator::WorkloadGenerator(WorkloadSpec spec, RngStream& rng)
    : spec_(std::move(spec)),
      rng_(rng),
      arrival_(spec_.kind == WorkloadKind::kAgent ? spec_.agent.arrival : spec_.synthetic.arrival) {
  int num_positive = 0;
  for (int i = 0; i < kNumDomains; ++i) {
    MOESIM_CHECK(spec_.domain_mix[i] >= 0.0, "negative domain weight");
    if (spec_.domain_mix[i] > 0.0) {
      ++num_positive;
      only_domain_ = static_cast<Domain>(i);
    }
  }
  MOESIM_CHECK(num_positive > 0, "domain_mix has no positive weight");
  if (num_positive > 1) domain_dist_ = std::make_unique<CategoricalDistribution>(spec_.domain_mix);

  switch (spec_.kind) {
    case WorkloadKind::kSynthetic:
      MOESIM_CHECK(spec_.num_requests || spec_.duration_s, "synthetic workload never stops");
      prompt_tokens_ = std::make_unique<ValueDistribution>(spec_.synthetic.prompt_tokens);
      output_tokens_ = std::make_unique<ValueDistribution>(spec_.synthetic.output_tokens);
      if (spec_.synthetic.reasoning_tokens) {
        reasoning_tokens_ = std::make_unique<ValueDistribution>(*spec_.synthetic.reasoning_tokens);
      }
      break;
    case WorkloadKind::kAgent:
      MOESIM_CHECK(spec_.num_sessions || spec_.duration_s, "agent workload never stops");
      planner_ = std::make_unique<AgentSessionPlanner>(spec_.agent);
      // Full blocks of the shared system prompt get the same hashes in every session.
      for (int64_t b = 0; b < spec_.agent.system_prompt_tokens / kPrefixBlockTokens; ++b) {
        system_prompt_hashes_.push_back(next_block_hash_++);
      }
      break;
    case WorkloadKind::kRequestTrace:
      MOESIM_CHECK(spec_.request_trace != nullptr, "request trace workload without rows");
      next_block_hash_ = spec_.request_trace->hash_bound;
      break;
    case WorkloadKind::kMooncake:
    case WorkloadKind::kAzure: {
      const TraceWorkloadSpec& tr = spec_.trace;
      MOESIM_CHECK(tr.records != nullptr, "trace workload without records");
      window_ = select_trace_window(*tr.records, tr.start_s, tr.end_s, tr.max_requests);
      trace_idx_ = window_.begin_idx;
      trace_multiplier_ = trace_rate_multiplier(tr);
      MOESIM_CHECK(trace_multiplier_ > 0.0, "trace rate multiplier must be > 0");
      if (tr.replay == TraceReplay::kLoop) {
        MOESIM_CHECK(window_.period_ns > 0, "trace loop without a lap length");
        shared_hash_ids_ = shared_hash_ids(*tr.records, window_);
        lap_hash_stride_ = hash_id_bound(*tr.records, window_);
      } else if (tr.replay == TraceReplay::kModel) {
        MOESIM_CHECK(tr.model != nullptr, "trace model replay without a model");
        model_sampler_ = std::make_unique<TraceModelSampler>(*tr.model, trace_multiplier_);
      }
      break;
    }
  }
}

Domain WorkloadGenerator::draw_domain() {
  if (!domain_dist_) return only_domain_;
  return static_cast<Domain>(domain_dist_->sample(rng_));
}

void WorkloadGenerator::extend_hashes(std::vector<uint64_t>& hashes, int64_t prompt_tokens) {
  const size_t num_blocks = static_cast<size_t>(num_prefix_blocks(prompt_tokens));
  while (hashes.size() < num_blocks) hashes.push_back(next_block_hash_++);
}

void WorkloadGenerator::hash_prompt(Request& r) {
  if (r.prompt_tokens > spec_.max_request_tokens - r.output_tokens) {
    // Rejected on arrival: no blocks, whatever the size; the counter moves as if they were made,
    // so later requests' hashes do not depend on the limit.
    next_block_hash_ += static_cast<uint64_t>(num_prefix_blocks(r.prompt_tokens));
    return;
  }
  extend_hashes(r.prefix_block_hashes, r.prompt_tokens);
}

Request WorkloadGenerator::new_request(SimTime arrival_ns, Domain domain) {
  MOESIM_CHECK(next_request_id_ < std::numeric_limits<int32_t>::max(), "request ids exhausted");
  Request r;
  r.id = RequestId(next_request_id_++);
  r.arrival_ns = arrival_ns;
  r.domain = domain;
  ++stats_.num_requests;
  return r;
}

std::optional<Request> WorkloadGenerator::next() {
  if (exhausted_) return std::nullopt;
  std::optional<Request> r;
  switch (spec_.kind) {
    case WorkloadKind::kSynthetic:
      r = next_synthetic();
      break;
    case WorkloadKind::kAgent:
      r = next_agent_session();
      break;
    case WorkloadKind::kMooncake:
    case WorkloadKind::kAzure:
      r = next_trace_row();
      break;
    case WorkloadKind::kRequestTrace:
      r = next_request_trace_row();
      break;
  }
  if (!r) exhausted_ = true;
  return r;
}

std::vector<Request> WorkloadGenerator::generate_all() {
  const bool unbounded =
      (spec_.kind == WorkloadKind::kMooncake || spec_.kind == WorkloadKind::kAzure) &&
      spec_.trace.replay != TraceReplay::kWindow && !spec_.duration_s;
  MOESIM_CHECK(!unbounded, "generate_all() of a trace loop or model without duration_s");
  std::vector<Request> out;
  while (std::optional<Request> r = next()) out.push_back(std::move(*r));
  return out;
}

std::optional<Request> WorkloadGenerator::next_synthetic() {
  if (spec_.num_requests && num_open_loop_ >= *spec_.num_requests) return std::nullopt;
  const std::optional<SimTime> next_ns = arrival_.next_arrival_ns(rng_);
  if (!next_ns) return std::nullopt;  // past the horizon
  const SimTime arrival_ns = *next_ns;
  if (spec_.duration_s && arrival_ns >= from_seconds(*spec_.duration_s)) return std::nullopt;
  ++num_open_loop_;
  Request r = new_request(arrival_ns, draw_domain());
  r.prompt_tokens = prompt_tokens_->sample_int(rng_);
  r.output_tokens = output_tokens_->sample_int(rng_);
  if (reasoning_tokens_) {
    r.reasoning_tokens = reasoning_tokens_->sample_int(rng_);
    r.output_tokens += r.reasoning_tokens;
  }
  hash_prompt(r);
  return r;
}

std::optional<Request> WorkloadGenerator::next_agent_session() {
  if (spec_.num_sessions && num_open_loop_ >= *spec_.num_sessions) return std::nullopt;
  const std::optional<SimTime> next_ns = arrival_.next_arrival_ns(rng_);
  if (!next_ns) return std::nullopt;  // past the horizon
  const SimTime arrival_ns = *next_ns;
  if (spec_.duration_s && arrival_ns >= from_seconds(*spec_.duration_s)) return std::nullopt;
  ++num_open_loop_;
  MOESIM_CHECK(next_session_id_ < std::numeric_limits<int32_t>::max(), "session ids exhausted");
  const SessionId id(next_session_id_++);
  ActiveSession& s = sessions_[id.value];
  const Domain domain = draw_domain();
  s.plan = planner_->draw(domain, rng_);
  s.prompt_tokens = spec_.agent.system_prompt_tokens + s.plan.turns[0].new_input_tokens;
  s.block_hashes = system_prompt_hashes_;
  extend_hashes(s.block_hashes, s.prompt_tokens);
  ++stats_.num_sessions;
  return session_request(id, s, arrival_ns, 0);
}

Request WorkloadGenerator::session_request(SessionId session, const ActiveSession& s,
                                           SimTime arrival_ns, int64_t reused_prefix_tokens) {
  const AgentAttemptPlan& a = s.plan.turns[s.turn_idx].attempts[s.attempt_idx];
  Request r = new_request(arrival_ns, s.plan.domain);
  r.prompt_tokens = s.prompt_tokens;
  r.reasoning_tokens = a.reasoning_tokens;
  r.output_tokens = a.reasoning_tokens + a.answer_tokens;
  r.session = session;
  r.turn_idx = s.turn_idx;
  r.attempt_idx = s.attempt_idx;
  r.reused_prefix_tokens = reused_prefix_tokens;
  r.prefix_block_hashes = s.block_hashes;
  return r;
}

std::optional<Request> WorkloadGenerator::on_turn_completed(SessionId session, SimTime now) {
  if (spec_.kind == WorkloadKind::kRequestTrace) return std::nullopt;
  auto it = sessions_.find(session.value);
  MOESIM_CHECK(it != sessions_.end(), "on_turn_completed for a session that is not active");
  ActiveSession& s = it->second;
  const AgentTurnPlan& turn = s.plan.turns[s.turn_idx];
  const AgentAttemptPlan& done = turn.attempts[s.attempt_idx];
  const SimTime arrival_ns = now + done.tool_wait_ns;
  if (done.fails) {
    if (static_cast<size_t>(s.attempt_idx) + 1 == turn.attempts.size()) {
      end_session(it);  // failed once more at the rollback limit
      return std::nullopt;
    }
    // Roll back to the snapshot before this turn: same prompt, all of it seen before.
    ++s.attempt_idx;
    ++stats_.num_rollbacks;
    return session_request(session, s, arrival_ns, s.prompt_tokens);
  }
  if (static_cast<size_t>(s.turn_idx) + 1 == s.plan.turns.size()) {
    end_session(it);
    return std::nullopt;
  }
  // With reasoning kept, the whole previous request (prompt and output) is the next prefix;
  // without, the answer moves (the reasoning before it is dropped), so only the prompt is.
  const int64_t reused_prefix_tokens =
      s.prompt_tokens +
      (spec_.agent.keep_reasoning_in_context ? done.reasoning_tokens + done.answer_tokens : 0);
  const int64_t carried = carried_output_tokens(spec_.agent, done);
  ++s.turn_idx;
  s.attempt_idx = 0;
  // Full blocks of the previous prompt are re-used; everything after is new content.
  s.block_hashes.resize(static_cast<size_t>(s.prompt_tokens / kPrefixBlockTokens));
  s.prompt_tokens += carried + s.plan.turns[s.turn_idx].new_input_tokens;
  extend_hashes(s.block_hashes, s.prompt_tokens);
  return session_request(session, s, arrival_ns, reused_prefix_tokens);
}

void WorkloadGenerator::abandon_session(SessionId session) {
  if (spec_.kind == WorkloadKind::kRequestTrace) return;
  auto it = sessions_.find(session.value);
  MOESIM_CHECK(it != sessions_.end(), "abandon_session for a session that is not active");
  sessions_.erase(it);
  ++stats_.num_sessions_abandoned;
}

void WorkloadGenerator::end_session(std::map<int32_t, ActiveSession>::iterator it) {
  switch (it->second.plan.end) {
    case AgentSessionEnd::kCompleted:
      ++stats_.num_sessions_completed;
      break;
    case AgentSessionEnd::kContextFull:
      ++stats_.num_sessions_context_full;
      break;
    case AgentSessionEnd::kRollbackLimit:
      ++stats_.num_sessions_rollback_limit;
      break;
  }
  sessions_.erase(it);
}

std::optional<Request> WorkloadGenerator::next_trace_row() {
  const TraceWorkloadSpec& tr = spec_.trace;
  if (tr.replay == TraceReplay::kModel) return next_model_draw();
  if (trace_idx_ >= window_.end_idx) {
    if (tr.replay == TraceReplay::kWindow) return std::nullopt;
    trace_idx_ = window_.begin_idx;
    ++lap_;
  }
  const TraceRecord& row = (*tr.records)[trace_idx_++];
  const double scaled_ns = (static_cast<double>(row.timestamp_ns - window_.start_ns) +
                            static_cast<double>(lap_) * static_cast<double>(window_.period_ns)) /
                           trace_multiplier_;
  // Rows are in time order: one past the horizon ends the trace, as for the arrival processes
  // (arrival_process.h).
  if (!(scaled_ns <= static_cast<double>(kHorizonNs))) return std::nullopt;
  const auto arrival_ns = static_cast<SimTime>(std::llround(scaled_ns));
  if (spec_.duration_s && arrival_ns >= from_seconds(*spec_.duration_s)) return std::nullopt;
  Request r = new_request(arrival_ns, draw_domain());
  r.prompt_tokens = row.input_tokens;
  r.output_tokens = row.output_tokens;
  if (spec_.kind == WorkloadKind::kMooncake) {
    r.prefix_block_hashes = row.hash_ids;
    if (lap_ > 0) {
      // Private ids move to the lap's own range above every id of the window.
      for (uint64_t& h : r.prefix_block_hashes) {
        if (std::binary_search(shared_hash_ids_.begin(), shared_hash_ids_.end(), h)) continue;
        uint64_t offset = 0;
        MOESIM_CHECK(
            !__builtin_mul_overflow(static_cast<uint64_t>(lap_), lap_hash_stride_, &offset) &&
                !__builtin_add_overflow(h, offset, &h),
            "trace loop hash ids overflow");
      }
    }
  } else {
    hash_prompt(r);
  }
  ++num_open_loop_;
  return r;
}

std::optional<Request> WorkloadGenerator::next_model_draw() {
  std::optional<TraceDraw> d = model_sampler_->next(rng_);
  if (!d) return std::nullopt;
  if (spec_.duration_s && d->arrival_ns >= from_seconds(*spec_.duration_s)) return std::nullopt;
  Request r = new_request(d->arrival_ns, draw_domain());
  r.prompt_tokens = d->input_tokens;
  r.output_tokens = d->output_tokens;
  if (spec_.trace.model->has_hash_ids) {
    r.prefix_block_hashes = std::move(d->hash_ids);
  } else {
    hash_prompt(r);
  }
  ++num_open_loop_;
  return r;
}

std::optional<Request> WorkloadGenerator::next_request_trace_row() {
  const std::vector<RequestTraceRow>& rows = spec_.request_trace->rows;
  if (trace_idx_ >= rows.size()) return std::nullopt;
  const RequestTraceRow& row = rows[trace_idx_++];
  Request r;
  r.id = RequestId(row.request_id);
  r.arrival_ns = row.arrival_ns;
  r.domain = row.domain;
  r.prompt_tokens = row.prompt_tokens;
  r.output_tokens = row.output_tokens;
  if (row.session_id >= 0) r.session = SessionId(row.session_id);
  r.turn_idx = row.turn_idx;
  if (row.has_prefix_blocks) {
    r.prefix_block_hashes = row.prefix_blocks;
  } else {
    hash_prompt(r);  // fresh hashes above every hash of the file
  }
  ++stats_.num_requests;
  ++num_open_loop_;
  return r;
}

int64_t count_open_loop_arrivals(const WorkloadSpec& spec, uint64_t root_seed,
                                 std::string_view stream, SimTime end_ns) {
  RngStream rng(root_seed, stream);
  WorkloadGenerator gen(spec, rng);
  int64_t count = 0;
  while (std::optional<Request> r = gen.next()) {
    if (r->arrival_ns > end_ns) break;
    ++count;
  }
  return count;
}

}  // namespace moesim::sim
