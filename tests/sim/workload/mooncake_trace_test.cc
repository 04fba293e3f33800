#include "sim/workload/mooncake_trace.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

const std::string kTraces = MOESIM_SOURCE_DIR "/data/traces/";

TEST(MooncakeTrace, ReadsConversationTrace) {
  const std::vector<TraceRecord> rows = read_mooncake_trace(kTraces + "conversation_trace.jsonl");
  ASSERT_EQ(rows.size(), 12031u);
  EXPECT_EQ(rows.front().timestamp_ns, 0);
  EXPECT_EQ(rows.front().input_tokens, 6758);
  EXPECT_EQ(rows.front().output_tokens, 500);
  EXPECT_EQ(rows.front().hash_ids,
            (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(rows.front().line, 1);
  EXPECT_EQ(rows.back().timestamp_ns, int64_t{3536999} * kNsPerMs);
  EXPECT_EQ(rows.back().input_tokens, 20774);
  EXPECT_EQ(rows.back().output_tokens, 508);
  EXPECT_EQ(rows.back().hash_ids.size(), 41u);
  EXPECT_EQ(rows.back().line, 12031);
  int64_t total_input = 0;
  int64_t total_output = 0;
  for (const TraceRecord& r : rows) {
    total_input += r.input_tokens;
    total_output += r.output_tokens;
  }
  EXPECT_EQ(total_input, 144793823);
  EXPECT_EQ(total_output, 4122048);
}

TEST(MooncakeTrace, ReadsSyntheticTrace) {
  const std::vector<TraceRecord> rows = read_mooncake_trace(kTraces + "synthetic_trace.jsonl");
  ASSERT_EQ(rows.size(), 3993u);
  EXPECT_EQ(rows.front().input_tokens, 40160);
  EXPECT_EQ(rows.front().output_tokens, 6);
  EXPECT_EQ(rows.back().timestamp_ns, int64_t{1022025} * kNsPerMs);
  EXPECT_EQ(rows.back().input_tokens, 18440);
  EXPECT_EQ(rows.back().output_tokens, 83);
  EXPECT_EQ(rows.back().hash_ids.size(), 37u);
}

TEST(MooncakeTrace, FractionalMillisecondsAndCrlfAndExtraKeys) {
  std::istringstream in(
      "{\"timestamp\": 1.5, \"input_length\": 513, \"output_length\": 2, \"hash_ids\": [7, 8], "
      "\"note\": \"ignored\"}\r\n"
      "{\"timestamp\": 1.5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [9]}");
  const std::vector<TraceRecord> rows = read_mooncake_trace(in, "mem.jsonl");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].timestamp_ns, 1'500'000);
  EXPECT_EQ(rows[0].hash_ids, (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(rows[1].timestamp_ns, 1'500'000);  // equal timestamps are allowed
}

TEST(MooncakeTrace, MissingFileIsAConfigError) {
  try {
    read_mooncake_trace("/nonexistent/trace.jsonl");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/trace.jsonl: cannot open trace file");
  }
}

// Nesting beyond the JSON depth limit is bad input naming the line, not a deep recursion.
TEST(MooncakeTrace, DeeplyNestedJsonIsAConfigErrorNamingTheLine) {
  std::istringstream in(
      "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n"
      "{\"timestamp\": " +
      std::string(100000, '[') + "\n");
  try {
    read_mooncake_trace(in, "deep.jsonl");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("deep.jsonl:2"), std::string::npos) << what;
    EXPECT_NE(what.find("nested more than 64 deep"), std::string::npos) << what;
    EXPECT_LT(what.size(), 200u);
  }
}

}  // namespace
}  // namespace moesim::sim
