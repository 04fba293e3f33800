// The bad-input corpus: every file under tests/data/bad/workload/ must raise a ConfigError with
// exactly the message listed here ({dir} stands for the corpus directory), and every file must be
// listed, so a new corpus file cannot go unchecked.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "sim/config/toml_source.h"
#include "sim/workload/azure_trace.h"
#include "sim/workload/mooncake_trace.h"
#include "sim/workload/workload_spec.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

const std::string kDir = MOESIM_SOURCE_DIR "/tests/data/bad/workload";

const std::map<std::string, std::string>& expected_messages() {
  static const std::map<std::string, std::string> kMessages = {
      // Mooncake JSONL.
      {"bad_json.jsonl",
       "{dir}/bad_json.jsonl:2:73: invalid JSON: syntax error while parsing object - unexpected "
       "end of input; expected '}'"},
      {"empty.jsonl", "{dir}/empty.jsonl: trace has no requests"},
      {"empty_line.jsonl", "{dir}/empty_line.jsonl:2: empty line"},
      {"hash_count.jsonl",
       "{dir}/hash_count.jsonl:1: hash_ids: has 2 blocks but input_length 1100 needs 3 "
       "(512-token blocks)"},
      {"missing_key.jsonl", "{dir}/missing_key.jsonl:3: output_length: missing key"},
      {"negative_hash.jsonl",
       "{dir}/negative_hash.jsonl:1: hash_ids[1]: expected an integer >= 0, got -1"},
      {"input_length_int64_max.jsonl",
       "{dir}/input_length_int64_max.jsonl:1: hash_ids: has 1 blocks but input_length "
       "9223372036854775807 needs 18014398509481984 (512-token blocks)"},
      {"length_above_int64.jsonl",
       "{dir}/length_above_int64.jsonl:1: input_length: value 9223372036854775808 is too large"},
      {"number_overflow.jsonl",
       "{dir}/number_overflow.jsonl:2: invalid JSON: number overflow parsing '1e400'"},
      {"negative_length.jsonl",
       "{dir}/negative_length.jsonl:2: input_length: must be >= 1 (got -5)"},
      {"negative_timestamp.jsonl",
       "{dir}/negative_timestamp.jsonl:1: timestamp: must be >= 0 ms (got -1)"},
      {"non_monotonic.jsonl",
       "{dir}/non_monotonic.jsonl:3: timestamp: timestamp 7 ms is earlier than the previous "
       "row's 10 ms"},
      {"not_object.jsonl", "{dir}/not_object.jsonl:1: expected a JSON object, got array"},
      {"string_length.jsonl",
       "{dir}/string_length.jsonl:1: input_length: expected an integer, got string"},
      // Azure CSV.
      {"azure_bad_datetime.csv",
       "{dir}/azure_bad_datetime.csv:3:1: TIMESTAMP: invalid datetime '2023-13-16 "
       "18:17:04.0319600' (expected YYYY-MM-DD HH:MM:SS[.fraction])"},
      {"azure_bad_header.csv",
       "{dir}/azure_bad_header.csv:1:1: expected the header "
       "'TIMESTAMP,ContextTokens,GeneratedTokens', got 'Timestamp,ContextTokens,GeneratedTokens'"},
      {"azure_missing_field.csv",
       "{dir}/azure_missing_field.csv:2: expected 3 comma-separated fields, got 2"},
      {"azure_negative_tokens.csv",
       "{dir}/azure_negative_tokens.csv:3:29: ContextTokens: must be >= 1 (got -3)"},
      {"azure_no_rows.csv", "{dir}/azure_no_rows.csv: trace has no requests"},
      {"azure_span_overflow.csv",
       "{dir}/azure_span_overflow.csv:3:1: TIMESTAMP: timestamp 2200-01-01 00:00:00 is over 292 "
       "years after the first row's (int64 nanoseconds overflow)"},
      {"azure_year_9999.csv",
       "{dir}/azure_year_9999.csv:3:1: TIMESTAMP: datetime '9999-12-31 23:59:59.0000000' is "
       "outside the years 1678 to 2261 that int64 nanoseconds cover"},
      {"azure_non_monotonic.csv",
       "{dir}/azure_non_monotonic.csv:3:1: TIMESTAMP: timestamp 2023-11-16 18:17:02.0000000 is "
       "earlier than the previous row's 2023-11-16 18:17:03.9799600"},
      {"azure_non_numeric.csv",
       "{dir}/azure_non_numeric.csv:2:34: GeneratedTokens: expected an integer, got 'ten'"},
      // [workload] tables.
      {"bounds_too_tight.toml",
       "{dir}/bounds_too_tight.toml:6:1: workload.prompt_tokens: bounds [1, 100] keep only "
       "0.00069576% of the distribution (need at least 1%)"},
      {"context_first_prompt_too_long.toml",
       "{dir}/context_first_prompt_too_long.toml:5:22: workload.max_context_tokens: value 8192 is "
       "below the largest first prompt: system_prompt_tokens 4000 + first_input_tokens up to "
       "5000"},
      {"context_too_small.toml",
       "{dir}/context_too_small.toml:5:22: workload.max_context_tokens: needs "
       "first_input_tokens.max, so that turn 0 fits (system_prompt_tokens + "
       "first_input_tokens.max <= max_context_tokens)"},
      {"domain_mix_unknown.toml",
       "{dir}/domain_mix_unknown.toml:4:28: workload.domain_mix.maths: unknown key 'maths' (did "
       "you mean 'math'?)"},
      {"end_before_start.toml",
       "{dir}/end_before_start.toml:5:9: workload.end_s: end_s 50 must be greater than start_s "
       "100"},
      {"gamma_without_cv.toml",
       "{dir}/gamma_without_cv.toml:4:1: workload.arrival.cv: missing required key (number)"},
      {"lognormal_both_forms.toml",
       "{dir}/lognormal_both_forms.toml:8:7: workload.prompt_tokens.p50: give either (p50, p99) "
       "or (mean, sigma) for a lognormal, not both"},
      {"missing_trace.toml",
       "{dir}/missing_trace.toml:3:8: workload.path: cannot open trace file "
       "'{dir}/no_such_trace.jsonl'"},
      {"no_stop.toml",
       "{dir}/no_stop.toml:1:1: workload: needs num_requests or duration_s (or both)"},
      {"poisson_with_cv.toml",
       "{dir}/poisson_with_cv.toml:7:1: workload.arrival.cv: unknown key 'cv' (valid keys: "
       "process, rate_per_s)"},
      {"rollback_probability_one.toml",
       "{dir}/rollback_probability_one.toml:4:24: workload.rollback_probability: value 1 is out "
       "of range [0, 0.99]"},
      // A bad row in a referenced trace names the trace file and line.
      {"trace_with_bad_row.toml",
       "{dir}/negative_length.jsonl:2: input_length: must be >= 1 (got -5)"},
      {"unknown_kind.toml",
       "{dir}/unknown_kind.toml:2:8: workload.kind: unknown value 'mooncak' (valid: synthetic, "
       "agent, mooncake, azure, request_trace)"},
      {"window_selects_nothing.toml",
       "{dir}/window_selects_nothing.toml:4:11: workload.start_s: the window [5000, inf) s "
       "selects no requests (the trace spans [0, 3537] s)"},
  };
  return kMessages;
}

std::string substitute_dir(std::string message) {
  const std::string dir_token = "{dir}";
  for (size_t pos; (pos = message.find(dir_token)) != std::string::npos;) {
    message.replace(pos, dir_token.size(), kDir);
  }
  return message;
}

// Loads one corpus file the way a scenario would; returns the error message ("" if none).
std::string error_of(const std::filesystem::path& file) {
  const std::string ext = file.extension().string();
  return testing::config_error_of([&] {
    if (ext == ".jsonl") {
      read_mooncake_trace(file.string());
    } else if (ext == ".csv") {
      read_azure_trace(file.string());
    } else {
      TomlDocument doc = TomlDocument::load_file(file.string());
      TomlTable root = doc.root();
      TomlTable workload = root.get_table("workload");
      parse_workload(workload, kDir);
      root.finish();
    }
  });
}

TEST(WorkloadBadInput, EveryCorpusFileFailsWithItsExactMessage) {
  int num_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    ++num_files;
    auto it = expected_messages().find(name);
    ASSERT_NE(it, expected_messages().end()) << "corpus file without an expected message";
    EXPECT_EQ(error_of(entry.path()), substitute_dir(it->second));
  }
  EXPECT_EQ(num_files, static_cast<int>(expected_messages().size()))
      << "an expected message names a file that is not in the corpus";
}

}  // namespace
}  // namespace moesim::sim
