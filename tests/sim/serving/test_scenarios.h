// Shared by the serving tests: the small scenarios of tests/data/scenarios/ and the invariants
// every run must satisfy.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim::testing {

inline const std::string kScenarioDir = MOESIM_SOURCE_DIR "/tests/data/scenarios/";

// Loads tests/data/scenarios/<name>.toml once per process.
inline const Scenario& test_scenario(const std::string& name) {
  static std::map<std::string, Scenario> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(name, load_scenario(kScenarioDir + name + ".toml")).first;
  return it->second;
}

// `opt` with RunOptions::keep_requests: the tests below read every request's record.
inline RunOptions keeping_requests(RunOptions opt = {}) {
  opt.keep_requests = true;
  return opt;
}

// Conservation and per-request sanity: every request is counted once, completed requests
// produced all their tokens in order (arrival <= scheduled <= first token <= done), rejected
// ones never ran, TTFT <= end to end, TPOT positive.
inline void expect_sane_run(const RunOutput& out, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_TRUE(out.conservation_ok) << out.conservation_message;
  EXPECT_GT(out.requests.size(), 0u);
  int64_t completed = 0, rejected = 0, in_flight = 0;
  std::set<std::pair<int32_t, int32_t>> ids;  // (request id, attempt)
  for (const RequestRecord& r : out.requests) {
    SCOPED_TRACE("request " + std::to_string(r.request_id));
    EXPECT_TRUE(ids.emplace(r.request_id, r.attempt_idx).second) << "counted twice";
    EXPECT_GE(r.arrival_ns, 0);
    EXPECT_LE(r.arrival_ns, out.end_ns);
    switch (r.outcome) {
      case RequestOutcome::kCompleted:
        ++completed;
        EXPECT_EQ(r.generated_tokens, r.output_tokens);
        EXPECT_GE(r.first_scheduled_ns, r.arrival_ns);
        EXPECT_GE(r.first_token_ns, r.first_scheduled_ns);
        EXPECT_GE(r.done_ns, r.first_token_ns);
        EXPECT_LE(r.ttft_ns(), r.e2e_ns());
        EXPECT_GE(r.replica, 0);
        if (r.generated_tokens >= 2) {
          EXPECT_GT(r.tpot_ns(), 0);
          EXPECT_LT(r.tpot_ns(), 1e9);  // tiny models: well under a second per token
        }
        EXPECT_GE(r.cached_prompt_tokens, 0);
        EXPECT_LT(r.cached_prompt_tokens, r.prompt_tokens);
        EXPECT_EQ(r.cached_prompt_tokens % 512, 0);
        break;
      case RequestOutcome::kRejected:
        ++rejected;
        EXPECT_FALSE(r.reject_reason.empty());
        EXPECT_EQ(r.generated_tokens, 0);
        EXPECT_EQ(r.first_token_ns, -1);
        EXPECT_EQ(r.done_ns, -1);
        break;
      case RequestOutcome::kInFlight:
        ++in_flight;
        EXPECT_LT(r.generated_tokens, r.output_tokens);
        EXPECT_EQ(r.done_ns, -1);
        break;
    }
  }
  EXPECT_EQ(out.summary.num_arrived, static_cast<int64_t>(out.requests.size()));
  EXPECT_EQ(out.summary.num_completed, completed);
  EXPECT_EQ(out.summary.num_rejected, rejected);
  EXPECT_EQ(out.summary.num_in_flight, in_flight);
  EXPECT_GT(out.counters.num_steps, 0);
  EXPECT_GE(out.summary.kv_high_water_fraction, 0.0);
  EXPECT_LE(out.summary.kv_high_water_fraction, 1.0);
  for (const GpuRecord& g : out.gpus) EXPECT_LE(g.kv_high_water_blocks, g.num_kv_blocks);
}

}  // namespace moesim::sim::testing
