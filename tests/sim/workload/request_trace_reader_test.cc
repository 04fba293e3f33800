// The request trace reader (kind = "request_trace"): a good file's rows, and every bad row or
// unknown key refused with FILE:LINE: KEY: REASON.
#include "sim/workload/request_trace_reader.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

const std::string kHeader =
    R"({"record": "header", "schema": "moesim.request_trace.v1", "model": {"name": "tiny"}, )"
    R"("seed": 1, "duration_ns": 1000})"
    "\n";

std::string error_of(const std::string& text) {
  std::istringstream in(text);
  try {
    read_request_trace(in, "t.jsonl");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(RequestTraceReader, ReadsHeaderAndRows) {
  std::istringstream in(
      kHeader + R"({"record": "request", "request_id": 7, "arrival_ns": 5, "prompt_tokens": 513, )"
                R"("output_tokens": 2, "session_id": 3, "turn_idx": 1, "domain": "code", )"
                R"("prefix_blocks": [40, 41]})"
                "\r\n"
                R"({"record": "request", "request_id": 2, "arrival_ns": 5, "prompt_tokens": 1, )"
                R"("output_tokens": 9})");
  const RequestTraceFile f = read_request_trace(in, "t.jsonl");
  EXPECT_EQ(f.model_name, "tiny");
  ASSERT_EQ(f.rows.size(), 2u);
  const RequestTraceRow& a = f.rows[0];
  EXPECT_EQ(a.request_id, 7);
  EXPECT_EQ(a.arrival_ns, 5);
  EXPECT_EQ(a.prompt_tokens, 513);
  EXPECT_EQ(a.output_tokens, 2);
  EXPECT_EQ(a.session_id, 3);
  EXPECT_EQ(a.turn_idx, 1);
  EXPECT_EQ(a.domain, Domain::kCode);
  EXPECT_TRUE(a.has_prefix_blocks);
  EXPECT_EQ(a.prefix_blocks, (std::vector<uint64_t>{40, 41}));
  EXPECT_EQ(a.line, 2);
  const RequestTraceRow& b = f.rows[1];  // the defaults; an equal arrival is allowed
  EXPECT_EQ(b.session_id, -1);
  EXPECT_EQ(b.turn_idx, 0);
  EXPECT_EQ(b.domain, Domain::kChat);
  EXPECT_FALSE(b.has_prefix_blocks);
  EXPECT_EQ(f.hash_bound, 42u);
}

TEST(RequestTraceReader, AHeaderWithoutRecordsIsARunWithoutArrivals) {
  std::istringstream in(kHeader);
  EXPECT_TRUE(read_request_trace(in, "t.jsonl").rows.empty());
}

TEST(RequestTraceReader, RefusesBadHeaders) {
  EXPECT_EQ(error_of(""), "t.jsonl: empty file: no request trace header");
  EXPECT_EQ(error_of(R"({"record": "request", "request_id": 1})"),
            "t.jsonl:1: request_id: unknown key (valid: record, schema, moesim_version, "
            "scenario, seed, overlap, comm_sms, model, topology, replicas, placement, scheduler, "
            "router, pools, admission, unsupported_policies, routing, slo, duration_ns)");
  EXPECT_EQ(error_of(R"({"record": "request"})"),
            "t.jsonl:1: record: line 1 must be the header (\"record\": \"header\")");
  EXPECT_EQ(error_of(R"({"record": "header", "schema": "moesim.step_trace.v1"})"),
            "t.jsonl:1: schema: expected \"moesim.request_trace.v1\", got "
            "\"moesim.step_trace.v1\"");
  EXPECT_EQ(error_of(R"({"record": "header", "schema": "moesim.request_trace.v1"})"),
            "t.jsonl:1: model: missing model object");
  EXPECT_EQ(error_of(R"({"record": "header", "schema": "moesim.request_trace.v1", "model": {}})"),
            "t.jsonl:1: model.name: missing model name");
}

TEST(RequestTraceReader, RefusesBadRowsNamingLineAndKey) {
  const std::string ok =
      R"({"record": "request", "request_id": 1, "arrival_ns": 10, "prompt_tokens": 4, )"
      R"("output_tokens": 2})"
      "\n";
  struct Case {
    std::string row;
    std::string error;
    bool after_ok = false;  // the bad row follows `ok` (line 2), as line 3
  };
  const Case cases[] = {
      {"", "t.jsonl:2: empty line"},
      {"[1]", "t.jsonl:2: expected a JSON object, got array"},
      {R"({"record": "request", "request_id": 2, "arrival_ns": 10, "prompt_tokens": 4, )"
       R"("output_tokens": 2, "priority": 1})",
       "t.jsonl:2: priority: unknown key (valid: record, request_id, arrival_ns, prompt_tokens, "
       "output_tokens, session_id, turn_idx, domain, prefix_blocks)"},
      {R"({"record": "header"})", "t.jsonl:2: record: expected \"request\", got \"header\""},
      {R"({"record": "request", "arrival_ns": 10, "prompt_tokens": 4, "output_tokens": 2})",
       "t.jsonl:2: request_id: missing key"},
      {R"({"record": "request", "request_id": 2, "arrival_ns": 1.5, "prompt_tokens": 4, )"
       R"("output_tokens": 2})",
       "t.jsonl:2: arrival_ns: expected an integer, got number"},
      {R"({"record": "request", "request_id": 2, "arrival_ns": 10, "prompt_tokens": 0, )"
       R"("output_tokens": 2})",
       "t.jsonl:2: prompt_tokens: value 0 is outside [1, 9223372036854775807]"},
      {R"({"record": "request", "request_id": 2, "arrival_ns": 10, "prompt_tokens": 4, )"
       R"("output_tokens": 2, "session_id": -2})",
       "t.jsonl:2: session_id: value -2 is outside [-1, 2147483646]"},
      {R"({"record": "request", "request_id": 2, "arrival_ns": 10, "prompt_tokens": 4, )"
       R"("output_tokens": 2, "domain": "poetry"})",
       "t.jsonl:2: domain: unknown domain \"poetry\" (valid: code, math, chat, multilingual)"},
      {R"({"record": "request", "request_id": 1, "arrival_ns": 10, "prompt_tokens": 4, )"
       R"("output_tokens": 2})",
       "t.jsonl:3: request_id: request_id 1 appears twice", true},
      {R"({"record": "request", "request_id": 2, "arrival_ns": 9, "prompt_tokens": 4, )"
       R"("output_tokens": 2})",
       "t.jsonl:3: arrival_ns: arrival_ns 9 is earlier than the previous row's 10 (line 2)", true},
      {R"({"record": "request", "request_id": 2, "arrival_ns": 10, "prompt_tokens": 513, )"
       R"("output_tokens": 2, "prefix_blocks": [1]})",
       "t.jsonl:2: prefix_blocks: has 1 blocks but prompt_tokens 513 needs 2 (512-token blocks)"},
      {R"({"record": "request", "request_id": 2, "arrival_ns": 10, "prompt_tokens": 4, )"
       R"("output_tokens": 2, "prefix_blocks": [-1]})",
       "t.jsonl:2: prefix_blocks[0]: expected an integer >= 0, got -1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.row);
    EXPECT_EQ(error_of(kHeader + (c.after_ok ? ok : "") + c.row + "\n"), c.error);
  }
}

}  // namespace
}  // namespace moesim::sim
