#include "sim/workload/workload_spec.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

namespace moesim::sim {
namespace {

WorkloadSpec parse(const std::string& toml, const std::string& base_dir = "") {
  TomlDocument doc = TomlDocument::parse_string(toml, "s.toml");
  TomlTable root = doc.root();
  TomlTable w = root.get_table("workload");
  WorkloadSpec spec = parse_workload(w, base_dir);
  root.finish();
  return spec;
}

TEST(WorkloadSpec, ParsesSynthetic) {
  const WorkloadSpec s = parse(R"(
[workload]
kind = "synthetic"
num_requests = 500
duration_s = 60
domain_mix = { code = 3, chat = 1 }
[workload.arrival]
process = "gamma"
rate_per_s = 20
cv = 4
[workload.prompt_tokens]
distribution = "lognormal"
p50 = 1024
p99 = 16384
max = 32768
[workload.output_tokens]
distribution = "empirical"
values = [16, 256]
weights = [1, 3]
[workload.reasoning_tokens]
distribution = "exponential"
mean = 400
)");
  EXPECT_EQ(s.kind, WorkloadKind::kSynthetic);
  EXPECT_EQ(s.num_requests, 500);
  EXPECT_EQ(s.duration_s, 60.0);
  EXPECT_EQ(s.domain_mix, (std::array<double, kNumDomains>{3, 0, 1, 0}));
  EXPECT_EQ(s.synthetic.arrival.process, ArrivalSpec::Process::kGamma);
  EXPECT_EQ(s.synthetic.arrival.cv, 4.0);
  EXPECT_NEAR(s.synthetic.prompt_tokens.mu, std::log(1024.0), 1e-12);
  EXPECT_NEAR(s.synthetic.prompt_tokens.sigma, std::log(16.0) / 2.3263478740408408, 1e-12);
  EXPECT_EQ(s.synthetic.prompt_tokens.max, 32768);
  EXPECT_EQ(s.synthetic.output_tokens.values, (std::vector<double>{16, 256}));
  ASSERT_TRUE(s.synthetic.reasoning_tokens.has_value());
  EXPECT_EQ(s.synthetic.reasoning_tokens->mean, 400.0);
  EXPECT_EQ(s.synthetic.reasoning_tokens->min, 0.0);
}

TEST(WorkloadSpec, ParsesAgentWithDefaults) {
  const WorkloadSpec s = parse(R"(
[workload]
kind = "agent"
num_sessions = 20
system_prompt_tokens = 3000
max_context_tokens = 131072
rollback_probability = 0.1
[workload.arrival]
rate_per_s = 0.5
[workload.turns]
distribution = "empirical"
values = [2, 8, 30]
[workload.first_input_tokens]
distribution = "lognormal"
mean = 2000
sigma = 0.7
max = 60000
[workload.new_input_tokens]
distribution = "lognormal"
p50 = 300
p99 = 6000
[workload.reasoning_tokens]
distribution = "lognormal"
mean = 800
sigma = 1.0
[workload.answer_tokens]
distribution = "constant"
value = 120
[workload.tool_wait_s]
distribution = "exponential"
mean = 3.0
max = 120
)");
  EXPECT_EQ(s.kind, WorkloadKind::kAgent);
  EXPECT_EQ(s.num_sessions, 20);
  EXPECT_FALSE(s.num_requests.has_value());
  EXPECT_EQ(s.agent.system_prompt_tokens, 3000);
  EXPECT_EQ(s.agent.max_context_tokens, 131072);
  EXPECT_EQ(s.agent.rollback_probability, 0.1);
  EXPECT_EQ(s.agent.max_rollbacks_per_turn, 3);
  EXPECT_TRUE(s.agent.keep_reasoning_in_context);
  EXPECT_FALSE(s.agent.tool_wait_s.integer);
  EXPECT_EQ(s.agent.tool_wait_s.max, 120.0);
  EXPECT_EQ(s.domain_mix, (std::array<double, kNumDomains>{0, 0, 1, 0}));
}

// A trace file is parsed once per process while it keeps its size and modification time (every
// run of a sweep or search parses its scenario again); a file that changed is read again.
TEST(WorkloadSpec, ATraceIsReadAgainOnlyWhenItsFileChanged) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("moesim-trace-cache-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "t.jsonl";
  auto write = [&](const std::string& text) { std::ofstream(file) << text; };
  const std::string toml = "[workload]\nkind = 'mooncake'\npath = '" + file.string() + "'\n";
  write("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1]}\n");
  const WorkloadSpec a = parse(toml);
  const WorkloadSpec b = parse(toml);
  ASSERT_EQ(a.trace.records->size(), 1u);
  EXPECT_EQ(a.trace.records.get(), b.trace.records.get());  // the same parsed rows
  write(
      "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1]}\n"
      "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [1, 2]}\n");
  const WorkloadSpec c = parse(toml);
  ASSERT_EQ(c.trace.records->size(), 2u);
  EXPECT_EQ((*c.trace.records)[1].output_tokens, 7);
  std::filesystem::remove_all(dir);
}

TEST(WorkloadSpec, TracePathsResolveAgainstBaseDir) {
  const WorkloadSpec s = parse(R"(
[workload]
kind = "mooncake"
path = "traces/synthetic_trace.jsonl"
rate_multiplier = 4
start_s = 10
end_s = 500
max_requests = 100
)",
                               MOESIM_SOURCE_DIR "/data");
  EXPECT_EQ(s.kind, WorkloadKind::kMooncake);
  EXPECT_EQ(s.trace.path, MOESIM_SOURCE_DIR "/data/traces/synthetic_trace.jsonl");
  ASSERT_NE(s.trace.records, nullptr);
  EXPECT_EQ(s.trace.records->size(), 3993u);
  EXPECT_EQ(s.trace.rate_multiplier, 4.0);
  EXPECT_EQ(s.trace.start_s, 10.0);
  EXPECT_EQ(s.trace.end_s, 500.0);
  EXPECT_EQ(s.trace.max_requests, 100);

  const WorkloadSpec abs = parse("[workload]\nkind = 'azure'\npath = '" MOESIM_SOURCE_DIR
                                 "/data/traces/AzureLLMInferenceTrace_code.csv'\n",
                                 "/elsewhere");
  EXPECT_EQ(abs.kind, WorkloadKind::kAzure);
  EXPECT_EQ(abs.trace.records->size(), 8819u);
  EXPECT_FALSE(abs.trace.end_s.has_value());
  EXPECT_EQ(workload_kind_name(abs.kind), "azure");
}

TEST(WorkloadSpec, ParsesTraceReplayModes) {
  const std::string head = "[workload]\nkind = 'mooncake'\npath = '" MOESIM_SOURCE_DIR
                           "/data/traces/conversation_trace.jsonl'\nend_s = 120\n";
  const WorkloadSpec window = parse(head + "rate_multiplier = 2\n");
  EXPECT_EQ(window.trace.replay, TraceReplay::kWindow);
  EXPECT_EQ(trace_rate_multiplier(window.trace), 2.0);
  EXPECT_EQ(window.trace.model, nullptr);

  const WorkloadSpec loop = parse(head + "replay = 'loop'\nrate_per_s = 339\nduration_s = 30\n");
  EXPECT_EQ(loop.trace.replay, TraceReplay::kLoop);
  EXPECT_EQ(loop.duration_s, 30.0);
  // 339 rows in [0, 120) s: 2.825 req/s, so 339 req/s is 120x.
  EXPECT_DOUBLE_EQ(trace_base_rate_per_s(loop.trace), 339 / 120.0);
  EXPECT_NEAR(trace_rate_multiplier(loop.trace), 120.0, 1e-9);
  EXPECT_EQ(workload_description(loop),
            "mooncake trace conversation_trace.jsonl, loop of [0, 120) s at 339 req/s (120x) for "
            "30 s");

  const WorkloadSpec model = parse(head + "replay = 'model'\nrate_multiplier = 3\n");
  ASSERT_NE(model.trace.model, nullptr);
  EXPECT_FALSE(model.duration_s.has_value());
  EXPECT_EQ(trace_rate_multiplier(model.trace), 3.0);
  EXPECT_NE(workload_description(model).find("model of [0, 120) s at "), std::string::npos);
  EXPECT_NE(workload_description(model).find(" sustained"), std::string::npos);
  EXPECT_EQ(workload_description(window),
            "mooncake trace conversation_trace.jsonl, window [0, 120) s replayed once at 2x");
}

TEST(WorkloadSpec, RefusesAmbiguousTraceReplayKeys) {
  const std::string head = "[workload]\nkind = 'mooncake'\npath = '" MOESIM_SOURCE_DIR
                           "/data/traces/conversation_trace.jsonl'\n";
  auto error = [&](const std::string& keys) {
    try {
      parse(head + keys);
    } catch (const ConfigError& e) {
      return e.key_path() + ": " + e.reason();
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("replay = 'loop'\nrate_per_s = 5\nrate_multiplier = 2\n"),
            "workload.rate_per_s: give rate_per_s or rate_multiplier, not both");
  EXPECT_EQ(error("rate_per_s = 5\n"),
            "workload.rate_per_s: needs replay = \"loop\" or \"model\": a window replay is the "
            "window's requests once (scale their times with rate_multiplier)");
  EXPECT_EQ(error("duration_s = 60\n"),
            "workload.duration_s: needs replay = \"loop\" or \"model\": a window replay ends with "
            "its last row (start_s and end_s select the window, in trace time)");
  EXPECT_EQ(error("replay = 'forever'\n").substr(0, 16), "workload.replay:");
  // One row and no end_s: no lap length.
  EXPECT_EQ(error("replay = 'loop'\nmax_requests = 1\n"),
            "workload.replay: the window's 1 row(s) give no lap length: give end_s (the window "
            "ends there)");
  EXPECT_EQ(error("replay = 'model'\nduration_s = 0\n").substr(0, 20), "workload.duration_s:");
}

TEST(WorkloadSpec, KeysOfAnotherKindAreUnknown) {
  try {
    parse(R"(
[workload]
kind = "azure"
path = ")" MOESIM_SOURCE_DIR R"(/data/traces/AzureLLMInferenceTrace_code.csv"
num_requests = 5
)");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.reason(), "unknown key 'num_requests' (did you mean 'max_requests'?)");
  }
}

}  // namespace
}  // namespace moesim::sim
