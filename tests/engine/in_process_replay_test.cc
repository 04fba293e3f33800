// Multi-rank replay in one process (CPU ranks as threads): the same records as replaying each
// simulated GPU alone, with the all-to-alls measured; mismatched replicas and failing ranks are
// reported instead of hanging.
#include "engine/in_process_replay.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>

#include "engine/input_error.h"

namespace moesim::engine {
namespace {

using nlohmann::json;

const std::string kTracePath =
    std::string(MOESIM_SOURCE_DIR) + "/tests/data/engine/tiny_steps.jsonl";

ReplayOptions fast_options() {
  ReplayOptions o;
  o.warmup = 0;
  o.repeats = 1;
  o.engine_version = "test";
  o.timing.pin = PinMode::kOff;  // the headers of one and of several ranks compare equal
  return o;
}

std::vector<json> parse_lines(const std::string& text) {
  std::vector<json> records;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) records.push_back(json::parse(line));
  return records;
}

std::unique_ptr<Backend> cpu_backend(int) { return make_backend("cpu"); }

std::vector<json> replay_ranks(const ReplayOptions& options, int num_ranks,
                               ReplaySummary* summary = nullptr) {
  const StepTrace trace = read_step_trace(kTracePath);
  std::ostringstream out;
  MeasurementWriter writer(out);
  const ReplaySummary s = replay_trace_in_process(trace, options, num_ranks, cpu_backend, writer);
  if (summary != nullptr) *summary = s;
  EXPECT_EQ(writer.num_records(), 1 + s.num_op_records + s.num_step_records);
  return parse_lines(out.str());
}

std::vector<json> replay_single(const ReplayOptions& options) {
  const StepTrace trace = read_step_trace(kTracePath);
  std::unique_ptr<Backend> backend = make_backend("cpu");
  std::ostringstream out;
  MeasurementWriter writer(out);
  replay_trace(*backend, trace, options, writer);
  return parse_lines(out.str());
}

// (step, sim_gpu, layer, op) -> the record's counts (measurement fields dropped).
using OpKey = std::tuple<int, int, int, std::string>;
std::map<OpKey, json> ops_by_key(const std::vector<json>& records) {
  std::map<OpKey, json> ops;
  for (const json& r : records) {
    if (r["record"] != "op") continue;
    const OpKey key{r["step"], r["sim_gpu"], r["layer"], r["op"]};
    EXPECT_EQ(ops.count(key), 0u) << "duplicate record " << r.dump();
    json counts = r;
    for (const char* f : {"measured", "measured_ns", "min_ns", "max_ns", "estimator", "wait_ns",
                          "noisy", "retries", "samples_ns", "samples_wait_ns"}) {
      counts.erase(f);
    }
    ops[key] = counts;
  }
  return ops;
}

bool is_all_to_all(const json& r) { return r["op"] == "dispatch_a2a" || r["op"] == "combine_a2a"; }

TEST(InProcessReplay, TwoRanksWriteTheRecordsOfEachGpuAloneWithMeasuredAllToAlls) {
  ReplaySummary summary;
  const std::vector<json> ranks = replay_ranks(fast_options(), 2, &summary);
  const std::vector<json> single = replay_single(fast_options());  // plays GPUs 0 and 1

  ASSERT_FALSE(ranks.empty());
  EXPECT_EQ(ranks[0]["record"], "header");
  EXPECT_EQ(ranks[0]["sim_gpus"], json::array({0, 1}));
  EXPECT_EQ(summary.gpus, std::vector<int32_t>({0, 1}));
  // Same header otherwise (the device name is the same CPU).
  json h_ranks = ranks[0], h_single = single[0];
  EXPECT_EQ(h_ranks, h_single);

  // Same op set with the same FLOP and byte counts.
  const std::map<OpKey, json> a = ops_by_key(ranks);
  const std::map<OpKey, json> b = ops_by_key(single);
  EXPECT_EQ(a.size(), 99u);  // 95 layer ops + one lm_head per (step, GPU)
  EXPECT_EQ(a, b);

  // All-to-alls measured with several ranks, not measured with one; everything else measured.
  int a2a_ranks = 0, a2a_single = 0;
  for (const json& r : ranks) {
    if (r["record"] != "op") continue;
    EXPECT_EQ(r["measured"], true) << r.dump();
    EXPECT_GE(r["measured_ns"].get<int64_t>(), 0);
    a2a_ranks += is_all_to_all(r);
  }
  for (const json& r : single) {
    if (r["record"] != "op") continue;
    EXPECT_EQ(r["measured"], !is_all_to_all(r)) << r.dump();
    a2a_single += is_all_to_all(r);
  }
  EXPECT_EQ(a2a_ranks, 16);
  EXPECT_EQ(a2a_single, 16);

  // Step records: one per (step, GPU) in both; no unmeasured ops with every rank present.
  int steps = 0;
  for (const json& r : ranks) {
    if (r["record"] != "step") continue;
    ++steps;
    EXPECT_EQ(r["num_not_measured"], 0);
  }
  EXPECT_EQ(steps, 4);
  // Records come rank by rank: every GPU 0 record before the first GPU 1 record.
  bool seen_gpu1 = false;
  for (size_t i = 1; i < ranks.size(); ++i) {
    if (ranks[i]["sim_gpu"] == 1) seen_gpu1 = true;
    if (seen_gpu1) {
      EXPECT_EQ(ranks[i]["sim_gpu"], 1);
    }
  }
}

TEST(InProcessReplay, RefusesARankCountThatDoesNotMatchTheReplica) {
  try {
    replay_ranks(fast_options(), 3);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), kTracePath +
                                         ": topology mismatch: replica 0 has 2 GPUs but 3 ranks "
                                         "are running (one rank per GPU)");
  }
}

TEST(InProcessReplay, RefusesGpuChoicesAndUnknownReplicas) {
  ReplayOptions o = fast_options();
  o.gpus = {1};
  EXPECT_THROW(replay_ranks(o, 2), InputError);
  o = fast_options();
  o.replica_idx = 4;
  try {
    replay_ranks(o, 2);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--replica 4: " + kTracePath + " has no such replica (replicas: 0)");
  }
}

TEST(InProcessReplay, AFailingRankIsReportedAndDoesNotHangTheOthers) {
  // Rank 1 gets too little memory: it fails before its first collective while rank 0 waits in
  // it. The OutOfMemoryError of rank 1 comes out; rank 0 is woken.
  const StepTrace trace = read_step_trace(kTracePath);
  std::ostringstream out;
  MeasurementWriter writer(out);
  const RankBackendFactory factory = [](int rank) {
    BackendOptions options;
    if (rank == 1) options.memory_limit_bytes = 4096;
    return make_backend("cpu", options);
  };
  try {
    replay_trace_in_process(trace, fast_options(), 2, factory, writer);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.available_bytes(), 4096);
    EXPECT_NE(std::string(e.what()).find("simulated GPU 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace moesim::engine
