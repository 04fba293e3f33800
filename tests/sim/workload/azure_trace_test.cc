#include "sim/workload/azure_trace.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

const std::string kTraces = MOESIM_SOURCE_DIR "/data/traces/";

TEST(AzureTrace, ParsesDatetimes) {
  EXPECT_EQ(parse_datetime_ns("1970-01-01 00:00:00"), 0);
  EXPECT_EQ(parse_datetime_ns("1970-01-02 00:00:01.5"), 86401 * kNsPerS + 500'000'000);
  EXPECT_EQ(parse_datetime_ns("2023-11-16 18:17:03.9799600"), 1700158623979960000);
  EXPECT_EQ(parse_datetime_ns("2024-02-29 00:00:00.000000001"), 1709164800000000001);
  EXPECT_FALSE(parse_datetime_ns("2023-02-29 00:00:00"));  // not a leap year
  EXPECT_FALSE(parse_datetime_ns("2023-11-16T18:17:03"));
  EXPECT_FALSE(parse_datetime_ns("2023-11-16 24:00:00"));
  EXPECT_FALSE(parse_datetime_ns("2023-11-16 18:17:03."));
  EXPECT_FALSE(parse_datetime_ns("2023-11-16 18:17:03.1234567890"));
  EXPECT_FALSE(parse_datetime_ns("2023-11-16 18:17"));
}

TEST(AzureTrace, ReadsCodeTrace) {
  const std::vector<TraceRecord> rows =
      read_azure_trace(kTraces + "AzureLLMInferenceTrace_code.csv");
  ASSERT_EQ(rows.size(), 8819u);
  EXPECT_EQ(rows.front().timestamp_ns, 0);
  EXPECT_EQ(rows.front().input_tokens, 4808);
  EXPECT_EQ(rows.front().output_tokens, 10);
  EXPECT_TRUE(rows.front().hash_ids.empty());
  EXPECT_EQ(rows.front().line, 2);
  EXPECT_EQ(rows[1].timestamp_ns, 52'000'000);
  EXPECT_EQ(rows.back().timestamp_ns, 3'435'948'056'000);
  EXPECT_EQ(rows.back().input_tokens, 549);
  EXPECT_EQ(rows.back().output_tokens, 173);
  int64_t total_input = 0;
  int64_t total_output = 0;
  for (const TraceRecord& r : rows) {
    total_input += r.input_tokens;
    total_output += r.output_tokens;
  }
  EXPECT_EQ(total_input, 18059974);
  EXPECT_EQ(total_output, 245896);
}

TEST(AzureTrace, ReadsConversationTrace) {
  const std::vector<TraceRecord> rows =
      read_azure_trace(kTraces + "AzureLLMInferenceTrace_conv.csv");
  ASSERT_EQ(rows.size(), 19366u);
  EXPECT_EQ(rows.front().input_tokens, 374);
  EXPECT_EQ(rows.front().output_tokens, 44);
  EXPECT_EQ(rows[1].timestamp_ns, 4'314'579'000);
  EXPECT_EQ(rows.back().timestamp_ns, 3'501'721'937'000);
  EXPECT_EQ(rows.back().input_tokens, 197);
  EXPECT_EQ(rows.back().output_tokens, 183);
}

TEST(AzureTrace, AcceptsCrlfLineEndings) {
  std::istringstream in(
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.5,10,2\r\n"
      "2023-11-16 18:17:04,20,3\r\n");
  const std::vector<TraceRecord> rows = read_azure_trace(in, "mem.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].timestamp_ns, 500'000'000);
  EXPECT_EQ(rows[1].input_tokens, 20);
}

// CR-only line endings make the whole file one line: refused at the header, with a short
// message that does not echo the file.
TEST(AzureTrace, RefusesBareCarriageReturnLineEndings) {
  std::string text = "TIMESTAMP,ContextTokens,GeneratedTokens\r";
  for (int i = 0; i < 10000; ++i) text += "2023-11-16 18:17:03.5,10,2\r";
  std::istringstream in(text);
  try {
    read_azure_trace(in, "mac.csv");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "mac.csv:1: lines end in a bare carriage return (old Mac line endings); rows must "
              "end in \\n or \\r\\n");
  }
}

}  // namespace
}  // namespace moesim::sim
