// The serving loop on the CPU backend: every request accounted for, every token emitted once,
// times ordered, the step log consistent with the records. Timing itself is not asserted (the
// machine is shared); only orderings and counts that no amount of noise can change.
#include "engine/serve/serve_loop.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/cpu/cpu_backend.h"
#include "engine/serve/request_trace.h"

namespace moesim::engine::serve {
namespace {

const std::string kTrace =
    std::string(MOESIM_SOURCE_DIR) + "/tests/data/engine/tiny_serve_ep2.jsonl";

struct Served {
  RequestTrace trace;
  StepTrace deployment;
  ServeResult result;
  std::string steps;
};

Served serve(const ServeOptions& options, int64_t memory_limit_bytes = int64_t{1} << 30) {
  Served s;
  s.trace = read_request_trace(kTrace);
  s.deployment.file = s.trace.file;
  s.deployment.model = s.trace.header.model;
  s.deployment.topology = s.trace.header.topology;
  s.deployment.replicas = s.trace.header.replicas;
  s.deployment.placements = {s.trace.header.placement};
  ServeInput input;
  input.deployment = &s.deployment;
  input.scheduler = s.trace.scheduler_config();
  input.admission = s.trace.admission;
  input.expert_share = s.trace.expert_share;
  for (const TraceRequest& r : s.trace.requests) {
    ServedArrival a;
    a.arrival.request = ServeRequest{r.request_id, r.arrival_ns, r.prompt_tokens, r.output_tokens};
    input.arrivals.push_back(a);
  }
  std::ostringstream steps;
  s.result = serve_requests(
      input, options,
      [&](int, int) {
        cpu::CpuBackendOptions o;
        o.memory_limit_bytes = memory_limit_bytes;
        return cpu::make_cpu_backend(o);
      },
      steps);
  s.steps = steps.str();
  return s;
}

TEST(ServeLoop, ServesEveryRequestToItsForcedLength) {
  const Served s = serve(ServeOptions{});
  ASSERT_EQ(s.result.requests.size(), s.trace.requests.size());
  std::map<int64_t, int64_t> emitted, first_emits;
  std::istringstream lines(s.steps);
  std::string line;
  int64_t steps = 0, last_end = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_GE(j["start_ns"].get<int64_t>(), last_end) << "one replica: steps do not overlap";
    EXPECT_GT(j["end_ns"].get<int64_t>(), j["start_ns"].get<int64_t>());
    last_end = j["end_ns"];
    for (const auto& seq : j["sequences"]) {
      if (seq[5].get<bool>()) ++emitted[seq[0].get<int64_t>()];
    }
    ++steps;
  }
  EXPECT_EQ(steps, s.result.num_steps);
  for (const RequestRecord& r : s.result.requests) {
    EXPECT_EQ(r.outcome, "completed") << r.request_id;
    EXPECT_EQ(r.generated_tokens, r.output_tokens) << r.request_id;
    EXPECT_EQ(emitted[r.request_id], r.output_tokens) << r.request_id;
    EXPECT_GE(r.first_scheduled_ns, r.arrival_ns) << r.request_id;
    EXPECT_GT(r.first_token_ns, r.first_scheduled_ns) << r.request_id;
    EXPECT_GE(r.done_ns, r.first_token_ns) << r.request_id;
    EXPECT_LE(r.done_ns, s.result.wall_ns) << r.request_id;
    EXPECT_EQ(r.replica, 0);
  }
  EXPECT_EQ(s.result.backend, "cpu");
}

TEST(ServeLoop, StopsAtTheWallLimitWithNothingLost) {
  ServeOptions o;
  o.max_wall_ns = 1;  // stops before the first step
  const Served s = serve(o);
  ASSERT_EQ(s.result.requests.size(), s.trace.requests.size());
  for (const RequestRecord& r : s.result.requests) {
    EXPECT_EQ(r.outcome, "in_flight") << r.request_id;
    EXPECT_EQ(r.first_token_ns, -1);
  }
  EXPECT_EQ(s.result.num_steps, 0);
  EXPECT_TRUE(s.steps.empty());
}

TEST(ServeLoop, RefusesWhatDoesNotFitBeforeServing) {
  EXPECT_THROW(serve(ServeOptions{}, 1 << 20), OutOfMemoryError);
}

}  // namespace
}  // namespace moesim::engine::serve
