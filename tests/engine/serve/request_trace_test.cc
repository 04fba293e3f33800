// Request-trace reader: the hand-written tiny trace parses into the expected structs; malformed
// traces are refused with FILE:LINE: FIELD: reason, unsupported policies by name.
#include "engine/serve/request_trace.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "engine/input_error.h"

namespace moesim::engine::serve {
namespace {

const std::string kTracePath =
    std::string(MOESIM_SOURCE_DIR) + "/tests/data/engine/tiny_requests.jsonl";

std::string trace_text() {
  std::ifstream in(kTracePath);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The trace text with the first occurrence of `from` replaced by `to` (which must exist).
std::string with(const std::string& from, const std::string& to) {
  std::string text = trace_text();
  const size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return pos == std::string::npos ? text : text.replace(pos, from.size(), to);
}

std::string error_of(const std::string& text) {
  try {
    parse_request_trace(text, "bad.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(RequestTrace, ReadsTheTinyTrace) {
  const RequestTrace t = read_request_trace(kTracePath);
  EXPECT_EQ(t.header.model.name, "tiny");
  EXPECT_EQ(t.header.model.layers.size(), 3u);
  EXPECT_EQ(t.header.scenario, "engine-tiny-serve");
  EXPECT_EQ(t.ranks_per_replica(), (std::vector<int64_t>{2, 1}));  // dp over 2, tp over 2
  EXPECT_EQ(t.scheduler.kv_blocks_per_rank, 1234);
  EXPECT_EQ(t.scheduler.max_step_tokens, -1);
  EXPECT_TRUE(t.scheduler.chunked_prefill);
  const SchedulerConfig c = t.scheduler_config();
  EXPECT_EQ(c.max_batch_tokens_per_gpu, 512);
  EXPECT_EQ(c.max_context_tokens, 131072);
  EXPECT_EQ(t.admission.router, RouterPolicy::kLeastOutstanding);
  ASSERT_EQ(t.admission.pools.size(), 2u);
  EXPECT_EQ(t.admission.pools[1].replicas, std::vector<int64_t>{1});
  ASSERT_TRUE(t.admission.concurrency_cap.has_value());
  EXPECT_EQ(t.admission.concurrency_cap->max_step_tokens_per_replica, 4096);
  ASSERT_TRUE(t.admission.queue_isolation.has_value());
  EXPECT_EQ(t.admission.queue_isolation->long_pool, "long");
  EXPECT_FALSE(t.admission.long_context_cap.has_value());
  ASSERT_EQ(t.expert_share.size(), 2u);
  EXPECT_DOUBLE_EQ(t.expert_share[1][0], 0.125);
  EXPECT_EQ(t.slo_ttft_ms, 2000.0);
  EXPECT_EQ(t.duration_ns, 200000000);
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_EQ(t.requests[0].session_id, 3);
  EXPECT_EQ(t.requests[0].domain, "chat");
  EXPECT_EQ(t.requests[1].session_id, -1);
  EXPECT_EQ(t.requests[1].line, 3);
  EXPECT_EQ(t.requests[1].domain, "code");
  EXPECT_EQ(t.requests[2].domain, "chat");  // the default
  EXPECT_EQ(t.requests[2].turn_idx, 0);     // the default
  EXPECT_EQ(t.requests[2].prefix_blocks, std::vector<uint64_t>{18446744073709551615ull});
  EXPECT_EQ(arrival_of(t.requests[1]).request.prompt_tokens, 9000);
  // The front built from it routes by class with the capped schedulers.
  ServeFront front(t.admission, c, t.ranks_per_replica());
  EXPECT_EQ(front.scheduler(1).config().max_seqs, 32);
  EXPECT_EQ(front.arrive(Arrival{ServeRequest{1, 0, 9000, 16}, -1}).pool, "long");
}

TEST(RequestTrace, RefusesUnsupportedPoliciesNamingThem) {
  EXPECT_EQ(error_of(with("\"unsupported_policies\": []",
                          "\"unsupported_policies\": [\"eplb\", \"hot_expert_replication\"]")),
            "bad.jsonl:1: unsupported_policies: the engine cannot run these policies: eplb, "
            "hot_expert_replication");
}

TEST(RequestTrace, RefusesWhatTheEngineCannotServe) {
  EXPECT_EQ(error_of(with("\"least_outstanding\"", "\"cache_aware\"")),
            "bad.jsonl:1: router: router 'cache_aware' is not supported by the engine (it needs a "
            "prefix cache; valid: round_robin, least_outstanding, session_affinity)");
  EXPECT_EQ(error_of(with("\"recompute\"", "\"swap\"")),
            "bad.jsonl:1: scheduler.preemption: unsupported preemption mode 'swap' (valid: "
            "recompute)");
  EXPECT_EQ(error_of(with("\"queue_isolation\"",
                          "\"long_context_cap\": {\"threshold_tokens\": 100, \"action\": "
                          "\"summarize\"}, \"queue_isolation\"")),
            "bad.jsonl:1: admission.long_context_cap.action: long_context_cap action 'summarize' "
            "is not supported by the engine (valid: reject, route)");
}

TEST(RequestTrace, UnknownKeysAreErrors) {
  EXPECT_EQ(error_of(with("\"duration_ns\"", "\"durations_ns\": 1, \"duration_ns\"")),
            "bad.jsonl:1: durations_ns: unknown key (valid: record, schema, moesim_version, "
            "scenario, seed, overlap, comm_sms, model, topology, replicas, placement, scheduler, "
            "router, pools, admission, routing, slo, duration_ns, unsupported_policies)");
  EXPECT_EQ(error_of(with("\"turn_idx\": 0", "\"turn\": 0")),
            "bad.jsonl:2: turn: unknown key (valid: record, request_id, arrival_ns, "
            "prompt_tokens, output_tokens, session_id, turn_idx, domain, prefix_blocks)");
  EXPECT_NE(error_of(with("\"prefix_caching\": false", "\"prefix_caching\": false, \"x\": 1"))
                .find("bad.jsonl:1: scheduler.x: unknown key"),
            std::string::npos);
}

TEST(RequestTrace, ReadsTheWritersConventions) {
  // -1: a concurrency-cap limit the table leaves unset; "" pools without isolation.
  const RequestTrace capped = parse_request_trace(
      with("\"max_step_tokens_per_replica\": 4096", "\"max_step_tokens_per_replica\": -1"),
      "t.jsonl");
  ServeFront front(capped.admission, capped.scheduler_config(), capped.ranks_per_replica());
  EXPECT_EQ(front.scheduler(0).config().max_seqs, 32);
  EXPECT_EQ(front.scheduler(0).config().max_step_tokens, -1);
  const RequestTrace shared = parse_request_trace(
      with("\"isolate\": true, \"short_pool\": \"short\", \"long_pool\": \"long\"",
           "\"isolate\": false, \"short_pool\": \"\", \"long_pool\": \"\""),
      "t.jsonl");
  EXPECT_FALSE(shared.admission.queue_isolation->isolate);
}

TEST(RequestTrace, RefusesBadValues) {
  EXPECT_EQ(error_of(with("\"max_step_tokens\": -1", "\"max_step_tokens\": 0")),
            "bad.jsonl:1: scheduler.max_step_tokens: must be -1 (no limit) or >= 1, got 0");
  EXPECT_EQ(error_of(with("\"kv_blocks_per_rank\": 1234, ", "")),
            "bad.jsonl:1: scheduler.kv_blocks_per_rank: missing");
  EXPECT_EQ(error_of(with("\"long_pool\": \"long\"", "\"long_pool\": \"huge\"")),
            "bad.jsonl:1: admission.queue_isolation.long_pool: pool 'huge' is not declared in "
            "pools");
  EXPECT_EQ(error_of(with("\"replicas\": [1]", "\"replicas\": [0]")),
            "bad.jsonl:1: pools[1].replicas[0]: replica 0 is in two pools");
  EXPECT_EQ(error_of(with("[0.0625, 0.0625,", "[0.5, 0.0625,")),
            "bad.jsonl:1: routing.expert_share[0]: shares sum to 1.437500, not 1");
  EXPECT_EQ(error_of(with("\"moesim.request_trace.v1\"", "\"moesim.step_trace.v1\"")),
            "bad.jsonl:1: schema: unsupported schema 'moesim.step_trace.v1' (expected "
            "moesim.request_trace.v1)");
  // The shared header parser's messages, as in step traces.
  EXPECT_EQ(error_of(with("\"top_k\": 2", "\"top_k\": 17")),
            "bad.jsonl:1: model.layers[1].ffn.top_k: exceeds num_routed_experts (16)");
}

TEST(RequestTrace, RefusesBadRequestRecords) {
  EXPECT_EQ(error_of(with("\"arrival_ns\": 1234567, \"prompt_tokens\": 100",
                          "\"arrival_ns\": 5, \"prompt_tokens\": 100")),
            "bad.jsonl:4: arrival_ns: requests must come in arrival order: 5 < 1234567 (line 3)");
  EXPECT_EQ(error_of(with("\"request_id\": 2", "\"request_id\": 0")),
            "bad.jsonl:4: request_id: request 0 listed twice");
  EXPECT_EQ(error_of(with("\"output_tokens\": 1,", "\"output_tokens\": 0,")),
            "bad.jsonl:4: output_tokens: must be >= 1, got 0");
  EXPECT_EQ(error_of(with("18446744073709551615", "-3")),
            "bad.jsonl:4: prefix_blocks[0]: expected an unsigned integer hash, got -3");
  EXPECT_EQ(error_of(with("[18446744073709551615]", "[1, 2]")),
            "bad.jsonl:4: prefix_blocks: has 2 hashes, expected ceil(prompt_tokens / 512) = 1");
  EXPECT_EQ(error_of(with("\"prompt_tokens\": 100", "\"prompt_tokens\": 9223372036854775807")),
            "bad.jsonl:4: prefix_blocks: has 1 hashes, expected ceil(prompt_tokens / 512) = "
            "18014398509481984");
  EXPECT_EQ(error_of(with("\"code\"", "\"poetry\"")),
            "bad.jsonl:3: domain: unknown domain 'poetry' (valid: code, math, chat, multilingual)");
  EXPECT_EQ(error_of(with("\"session_id\": -1", "\"session_id\": -2")),
            "bad.jsonl:3: session_id: must be >= -1, got -2");
  EXPECT_EQ(error_of(with("\"record\": \"request\", \"request_id\": 1",
                          "\"record\": \"step\", \"request_id\": 1")),
            "bad.jsonl:3: record: unknown record kind 'step' (valid: request)");
  EXPECT_EQ(error_of(""), "bad.jsonl:1: record: empty trace (no header)");
  EXPECT_EQ(error_of(trace_text() + "{\"record\": \"request\", \"request_id\": 9, tru")
                .rfind("bad.jsonl:5: record: invalid JSON: ", 0),
            0u);
}

TEST(RequestTrace, MissingFileCannotOpen) {
  try {
    read_request_trace("/nonexistent/requests.jsonl");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/requests.jsonl: cannot open");
  }
}

}  // namespace
}  // namespace moesim::engine::serve
