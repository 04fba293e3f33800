// The run writers: summary JSON and text, requests CSV, Chrome trace, and the step trace, whose
// header and step records are the contract with the engine (docs/schemas/step_trace.md).
#include "sim/output/run_outputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/sim/serving/test_scenarios.h"

namespace moesim::sim::output {
namespace {

using nlohmann::json;
using testing::test_scenario;

struct Recorded {
  const Scenario* sc;
  RunOutput out;
};

// Each scenario run once per process, recording every step and a Chrome-trace window.
const Recorded& recorded(const std::string& name) {
  static std::map<std::string, Recorded> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  const Scenario& sc = test_scenario(name);
  RunOptions opt = testing::keeping_requests();
  opt.record_steps = true;
  opt.record_max_steps = 400;
  opt.chrome_trace = true;
  opt.trace_start_ns = from_seconds(0.2);
  opt.trace_end_ns = from_seconds(0.3);
  return cache.emplace(name, Recorded{&sc, run_scenario(sc, opt)}).first->second;
}

std::vector<json> parse_lines(const std::string& text) {
  std::vector<json> lines;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) lines.push_back(json::parse(line));
  return lines;
}

std::string step_trace(const std::string& name) {
  const Recorded& r = recorded(name);
  std::ostringstream os;
  write_step_trace(os, *r.sc, r.out, r.sc->run.seed);
  return os.str();
}

TEST(StepTraceTest, HeaderDescribesModelTopologyReplicasAndPlacement) {
  std::vector<json> lines = parse_lines(step_trace("tiny_synthetic"));
  ASSERT_GT(lines.size(), 1u);
  const json& h = lines[0];
  EXPECT_EQ(h["record"], "header");
  EXPECT_EQ(h["schema"], "moesim.step_trace.v1");
  EXPECT_EQ(h["scenario"], "tiny_synthetic");
  EXPECT_EQ(h["seed"], 7);
  const json& m = h["model"];
  EXPECT_EQ(m["name"], "tiny");
  EXPECT_EQ(m["hidden_size"], 256);
  EXPECT_EQ(m["vocab_size"], 1024);
  EXPECT_EQ(m["dtypes"]["experts"], "bf16");
  EXPECT_EQ(m["dtypes"]["dispatch"], "fp8");
  EXPECT_EQ(m["dtypes"]["state"], "fp32");
  ASSERT_EQ(m["layers"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(m["layers"][i]["layer"], i);
  EXPECT_EQ(m["layers"][0]["ffn"]["kind"], "dense");
  EXPECT_EQ(m["layers"][0]["ffn"]["intermediate_size"], 512);
  const json& mla = m["layers"][0]["attention"];
  EXPECT_EQ(mla["kind"], "mla");
  EXPECT_EQ(mla["q_lora_rank"], 128);
  EXPECT_EQ(mla["qk_rope_head_dim"], 16);
  // The KDA fields the engine needs to build real-shaped weights.
  const json& kda = m["layers"][1]["attention"];
  EXPECT_EQ(kda["kind"], "kda");
  EXPECT_EQ(kda["head_dim_k"], 32);
  EXPECT_EQ(kda["short_conv_kernel"], 4);
  EXPECT_EQ(kda["gate_lora_rank"], 32);
  EXPECT_EQ(kda["output_gate"], true);
  const json& moe = m["layers"][1]["ffn"];
  EXPECT_EQ(moe["kind"], "moe");
  EXPECT_EQ(moe["num_routed_experts"], 16);
  EXPECT_EQ(moe["top_k"], 2);
  EXPECT_EQ(moe["num_shared_experts"], 1);
  EXPECT_EQ(moe["shared_intermediate_size"], 128);
  EXPECT_EQ(moe["scoring"], "sigmoid");
  EXPECT_EQ(h["topology"]["num_gpus"], 8);
  EXPECT_EQ(h["topology"]["gpu"], "h200-sxm");
  ASSERT_EQ(h["replicas"].size(), 1u);
  EXPECT_EQ(h["replicas"][0]["gpus"], json({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(h["replicas"][0]["attention"], "dp");
  EXPECT_EQ(h["replicas"][0]["ep_size"], 8);
  EXPECT_EQ(h["placement"]["num_slots_per_gpu"], 2);
  ASSERT_EQ(h["placement"]["expert_gpus"].size(), 16u);
  for (int e = 0; e < 16; ++e) EXPECT_EQ(h["placement"]["expert_gpus"][e], json({e / 2}));
}

TEST(StepTraceTest, GqaLayersCarryQkNorm) {
  json m = model_shapes_json(*test_scenario("tiny_dense").model, DeploymentSpec{});
  EXPECT_EQ(m["layers"][0]["attention"]["kind"], "gqa");
  EXPECT_EQ(m["layers"][0]["attention"]["num_kv_heads"], 2);
  EXPECT_EQ(m["layers"][0]["attention"]["qk_norm"], false);
}

// The engine's checks on step records (docs/schemas/step_trace.md, "What the engine checks").
// Returns the number of (step, layer, source GPU, expert) cells whose count exceeds the source's
// tokens (a token picks an expert at most once); the other checks are expectations.
int64_t check_steps(const std::string& name) {
  SCOPED_TRACE(name);
  std::vector<json> lines = parse_lines(step_trace(name));
  EXPECT_GT(lines.size(), 1u);
  if (lines.empty()) return 0;
  const json& h = lines[0];
  int64_t num_repeated_picks = 0;
  std::vector<int64_t> moe_layers;
  for (const json& l : h["model"]["layers"]) {
    if (l["ffn"]["kind"] == "moe") moe_layers.push_back(l["layer"]);
  }
  const int64_t top_k =
      moe_layers.empty() ? 0 : h["model"]["layers"][moe_layers[0]]["ffn"]["top_k"].get<int64_t>();
  std::vector<std::set<int64_t>> expert_gpus;
  for (const json& e : h["placement"]["expert_gpus"]) expert_gpus.emplace_back(e.begin(), e.end());
  std::map<int64_t, std::set<int64_t>> replica_gpus;
  for (const json& r : h["replicas"]) {
    replica_gpus[r["replica"]] = std::set<int64_t>(r["gpus"].begin(), r["gpus"].end());
  }
  int64_t num_steps = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const json& s = lines[i];
    SCOPED_TRACE("line " + std::to_string(i + 1));
    EXPECT_EQ(s["record"], "step");
    ++num_steps;
    EXPECT_EQ(s["sim"]["step_ns"], s["end_ns"].get<int64_t>() - s["start_ns"].get<int64_t>());
    const std::set<int64_t>& gpus = replica_gpus.at(s["replica"]);
    std::map<int64_t, int64_t> tokens_of_gpu;
    for (const json& q : s["sequences"]) {
      EXPECT_TRUE(gpus.count(q["gpu"])) << q.dump();
      EXPECT_TRUE(q["phase"] == "prefill" || q["phase"] == "decode");
      if (q["phase"] == "decode") {
        EXPECT_EQ(q["new_tokens"], 1);
      }
      EXPECT_GE(q["context_tokens"].get<int64_t>(), 0);
      tokens_of_gpu[q["gpu"]] += q["new_tokens"].get<int64_t>();
    }
    EXPECT_EQ(s["layers"].size(), moe_layers.size());
    for (size_t l = 0; l < std::min(moe_layers.size(), s["layers"].size()); ++l) {
      const json& layer = s["layers"][l];
      EXPECT_EQ(layer["layer"], moe_layers[l]);
      EXPECT_GE(layer["dispatch_bytes"].get<double>(), 0);
      EXPECT_GE(layer["combine_bytes"].get<double>(), 0);
      std::map<int64_t, int64_t> from_src;
      std::map<std::pair<int64_t, int64_t>, int64_t> src_expert;
      for (const json& r : layer["routing"]) {
        const int64_t src = r[0], expert = r[1], dst = r[2], count = r[3];
        EXPECT_GE(count, 1);
        EXPECT_TRUE(gpus.count(src));
        EXPECT_TRUE(expert_gpus.at(expert).count(dst)) << r.dump();
        from_src[src] += count;
        src_expert[{src, expert}] += count;
      }
      // Per source GPU the counts sum to top_k times its tokens.
      for (int64_t g : gpus) EXPECT_EQ(from_src[g], top_k * tokens_of_gpu[g]) << "gpu " << g;
      for (const auto& [key, count] : src_expert) {
        num_repeated_picks += count > tokens_of_gpu[key.first];
      }
    }
  }
  EXPECT_EQ(num_steps, static_cast<int64_t>(recorded(name).out.steps.size()));
  return num_repeated_picks;
}

TEST(StepTraceTest, StepsFollowTheEngineContract) { check_steps("tiny_synthetic"); }
TEST(StepTraceTest, StepsFollowTheEngineContractWithTwoReplicas) { check_steps("tiny_agent"); }

// Regression (RecordObserver::on_routing, sim/serving/step_recorder.cc): each (src, dst GPU)
// count is split over the destination's experts; one source's count for an expert must not
// exceed the source's tokens (e.g. 1 token, top_k 2, both picks on GPU d), or the engine rejects
// the trace. The split caps each expert's share at the source's tokens.
TEST(StepTraceTest, NoTokenPicksAnExpertTwice) {
  EXPECT_EQ(check_steps("tiny_synthetic") + check_steps("tiny_agent"), 0);
}

// Regression (try_start_step, sim/serving/cluster_scheduler.cc): steps of a model without MoE
// layers are recorded too (the recorder needs the placement only in on_routing, which dense
// models never call), so `--record` writes more than the header.
TEST(StepTraceTest, DenseModelStepsAreRecorded) { check_steps("tiny_dense"); }

TEST(StepTraceTest, RecordMaxStepsCapsTheTrace) {
  EXPECT_EQ(recorded("tiny_synthetic").out.steps.size(), 400u);
}

TEST(ChromeTraceTest, IsValidJsonWithCompleteEvents) {
  const Recorded& r = recorded("tiny_synthetic");
  std::ostringstream os;
  write_chrome_trace(os, r.out);
  json doc = json::parse(os.str());
  ASSERT_TRUE(doc["traceEvents"].is_array());
  int64_t x = 0, meta = 0;
  std::set<std::string> names;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "M") {
      ++meta;
      EXPECT_EQ(e["name"], "thread_name");
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    ++x;
    names.insert(e["name"]);
    EXPECT_GE(e["ts"].get<double>(), 0.2e6);  // microseconds, inside the window's steps
    EXPECT_GT(e["dur"].get<double>(), 0);
    EXPECT_EQ(e["pid"], 0);
    EXPECT_GE(e["tid"].get<int>(), 0);
    EXPECT_LT(e["tid"].get<int>(), 8);
  }
  EXPECT_GT(x, 100);
  EXPECT_EQ(meta, 8);  // one named track per GPU
  for (const char* n :
       {"attention", "dense_ffn", "router", "dispatch", "experts", "combine", "lm_head"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
}

TEST(ChromeTraceTest, NamesEveryReplicaWithItsRole) {
  DeploymentSpec d;
  d.num_replicas = 3;
  d.prefill_replicas = 1;
  std::ostringstream os;
  write_chrome_trace(os, RunOutput{}, &d);
  const json doc = json::parse(os.str());
  std::map<int, std::string> names;
  for (const json& e : doc["traceEvents"]) {
    if (e["name"] == "process_name") names[e["pid"].get<int>()] = e["args"]["name"];
  }
  EXPECT_EQ(names,
            (std::map<int, std::string>{
                {0, "replica 0 (prefill)"}, {1, "replica 1 (decode)"}, {2, "replica 2 (decode)"}}));
  d.prefill_replicas = 0;
  d.pools = {{"chat", 1}, {"agents", 2}};
  std::ostringstream pools;
  write_chrome_trace(pools, RunOutput{}, &d);
  EXPECT_NE(pools.str().find("replica 0 (pool chat)"), std::string::npos);
  EXPECT_NE(pools.str().find("replica 2 (pool agents)"), std::string::npos);
}

// A compute span slowed by SM sharing (docs/serving.md, "SM sharing") carries its share of the
// SMs and the time it lost; other spans carry only their layer.
TEST(ChromeTraceTest, SlowedSpansShowTheirSmShare) {
  RunOutput out;
  out.trace.push_back(TraceSlice{0, 3, "experts/mb1", 5, 1000, 11000, 2000, 9.0 / 11});
  out.trace.push_back(TraceSlice{0, 3, "combine/mb0", 5, 1000, 4000});
  std::ostringstream os;
  write_chrome_trace(os, out);
  const json doc = json::parse(os.str());
  int32_t spans = 0;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++spans;
    if (e["name"] == "experts/mb1") {
      EXPECT_EQ(e["args"]["layer"], 5);
      EXPECT_DOUBLE_EQ(e["args"]["sm_share"].get<double>(), 9.0 / 11);
      EXPECT_DOUBLE_EQ(e["args"]["sm_lost_us"].get<double>(), 2.0);
    } else {
      EXPECT_EQ(e["args"], (json{{"layer", 5}}));
    }
  }
  EXPECT_EQ(spans, 2);
}

// Spans of one GPU track never overlap: each span's end is rounded from the same clock value as
// the next span's start.
TEST(ChromeTraceTest, SpansOfATrackDoNotOverlap) {
  const Recorded& r = recorded("tiny_synthetic");
  std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<SimTime, SimTime>>> tracks;
  for (const TraceSlice& t : r.out.trace) {
    if (t.gpu >= 0) tracks[{t.replica, t.gpu}].push_back({t.start_ns, t.duration_ns});
  }
  ASSERT_FALSE(tracks.empty());
  for (auto& [track, spans] : tracks) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      EXPECT_LE(spans[i - 1].first + spans[i - 1].second, spans[i].first)
          << "replica " << track.first << " gpu " << track.second << " span " << i;
    }
  }
}

TEST(RequestsCsvTest, OneRowPerRequestWithTheHeaderColumns) {
  const Recorded& r = recorded("tiny_too_long");
  std::ostringstream os;
  write_requests_csv(os, r.out);
  std::istringstream is(os.str());
  std::string line;
  ASSERT_TRUE(std::getline(is, line));
  const size_t columns = std::count(line.begin(), line.end(), ',') + 1;
  EXPECT_EQ(columns, 24u);
  size_t rows = 0, rejected = 0;
  while (std::getline(is, line)) {
    ++rows;
    EXPECT_EQ(static_cast<size_t>(std::count(line.begin(), line.end(), ',')) + 1, columns) << line;
    if (line.find(",rejected,context_too_long,") != std::string::npos) {
      ++rejected;
      // No latencies for a rejected request: the four latency fields are empty, no loaded
      // prompt tokens, and no KV load or prefill time.
      EXPECT_EQ(line.substr(line.size() - 8), ",,,,,0,,") << line;
    }
  }
  EXPECT_EQ(rows, r.out.requests.size());
  EXPECT_GT(rejected, 0u);
}

TEST(SummaryTest, JsonHasTheCountsAndIsDeterministic) {
  const Recorded& r = recorded("tiny_agent");
  json j = summary_json(*r.sc, r.out, 3);
  EXPECT_EQ(j["scenario"], "tiny_agent");
  EXPECT_EQ(j["seed"], 3);
  EXPECT_EQ(j["conservation_ok"], true);
  EXPECT_EQ(j["requests"]["arrived"].get<int64_t>(), j["requests"]["completed"].get<int64_t>() +
                                                         j["requests"]["rejected"].get<int64_t>() +
                                                         j["requests"]["in_flight"].get<int64_t>());
  EXPECT_EQ(j["event_digest"], r.out.digest_hex);
  EXPECT_GT(j["memory_per_gpu"]["num_kv_blocks"].get<int64_t>(), 0);
  EXPECT_GT(j["actions"]["rollback"].get<int64_t>(), 0);
  std::ostringstream text;
  write_summary_text(text, *r.sc, r.out, 3);
  EXPECT_NE(text.str().find("conservation ok"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find(r.out.digest_hex), std::string::npos);
}

// Every figure of the JSON summary is in the text, bytes in binary units (never 1.02e+10), and
// byte counters are whole numbers in the JSON.
TEST(SummaryTest, TextHasEveryJsonFigureWithUnits) {
  const Recorded& r = recorded("tiny_agent");
  std::ostringstream os;
  write_summary_text(os, *r.sc, r.out, 3);
  const std::string text = os.str();
  for (const char* part : {"arrived ",
                           "completed ",
                           "rejected ",
                           "in flight ",
                           "conservation ok",
                           "p50",
                           "p90",
                           "p99",
                           "mean",
                           "max",
                           "samples",
                           "input tok/s",
                           "output tok/s",
                           "completed req/s",
                           "met of",
                           "decided, attainment ",
                           "goodput ",
                           "compute ",
                           "communication ",
                           "barrier wait ",
                           "KV high-water ",
                           "prefix-cache hit rate ",
                           "preemptions ",
                           "KV evictions ",
                           "load imbalance ",
                           "dispatch ",
                           "combine ",
                           "KV transfers ",
                           "HBM ",
                           "weights ",
                           "KV pool ",
                           "blocks of ",
                           "cost model ",
                           "queries outside",
                           "actions ",
                           "rollback=",
                           "event digest ",
                           " MiB",
                           " GiB"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  }
  EXPECT_EQ(text.find("e+"), std::string::npos) << text;
  json j = summary_json(*r.sc, r.out, 3);
  for (const char* key : {"dispatch_bytes", "combine_bytes", "kv_transfer_bytes"}) {
    EXPECT_TRUE(j["counters"][key].is_number_integer()) << key;
  }
  for (const char* key : {"hbm_bytes", "weight_bytes", "kv_pool_bytes", "kv_block_bytes"}) {
    EXPECT_TRUE(j["memory_per_gpu"][key].is_number_integer()) << key;
  }
  EXPECT_EQ(j["slo"]["num_decided"], r.out.summary.slo.num_decided);
}

// A run too short for any request: every figure without samples is null in the JSON and "n/a"
// in the text, never 0.
TEST(SummaryTest, FiguresWithoutSamplesAreNullAndNa) {
  Scenario sc = test_scenario("tiny_synthetic");
  sc.run.duration_s = 0.002;
  RunOutput out = run_scenario(sc, testing::keeping_requests());
  ASSERT_EQ(out.summary.num_completed, 0);
  json j = summary_json(sc, out, 1);
  for (const char* figure : {"queueing_ms", "ttft_ms", "tpot_ms", "e2e_ms"}) {
    EXPECT_EQ(j[figure]["count"], 0) << figure;
    for (const char* p : {"p50", "p90", "p99", "mean", "max"}) {
      EXPECT_TRUE(j[figure][p].is_null()) << figure << "." << p;
    }
  }
  EXPECT_TRUE(j["slo"]["attainment"].is_null());
  EXPECT_EQ(j["slo"]["num_decided"], 0);
  EXPECT_TRUE(j["requests"]["max_wait_first_token_ms"].is_null());
  EXPECT_TRUE(j["prefix_cache_hit_rate"].is_null());
  EXPECT_FALSE(j["throughput"]["output_tokens_per_s"].is_null());  // 0 tokens in 2 ms: a figure
  std::ostringstream os;
  write_summary_text(os, sc, out, 1);
  EXPECT_NE(os.str().find("TPOT                 n/a        n/a"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("attainment n/a"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("prefix-cache hit rate n/a"), std::string::npos) << os.str();
}

TEST(SummaryTest, DenseModelHasNoExpertImbalance) {
  const Scenario& sc = test_scenario("tiny_dense");
  RunOutput out = run_scenario(sc, testing::keeping_requests());
  EXPECT_TRUE(summary_json(sc, out, 1)["expert_gpu_imbalance"].is_null());
  std::ostringstream os;
  write_summary_text(os, sc, out, 1);
  EXPECT_NE(os.str().find("(max-mean)/mean n/a"), std::string::npos) << os.str();
}

// The step series (steps.csv): one row per executed step, consistent with the recorded steps
// and the KV pools, and an observer (the event digest does not move).
TEST(StepsCsvTest, OneRowPerStepMatchingTheRecordedSteps) {
  // P/D: a prefill and a decode replica, each with its own rows.
  const Scenario& sc = test_scenario("tiny_pd");
  RunOptions opt;
  opt.record_steps = true;
  opt.record_max_steps = 100000;
  RunOutput plain = run_scenario(sc, opt);
  opt.step_series = true;
  RunOutput out = run_scenario(sc, opt);
  EXPECT_EQ(out.digest, plain.digest);
  EXPECT_TRUE(plain.step_series.empty());
  ASSERT_EQ(static_cast<int64_t>(out.step_series.size()), out.counters.num_steps);
  ASSERT_EQ(out.step_series.size(), out.steps.size());
  std::map<int32_t, const StepSeriesRow*> last;
  for (size_t i = 0; i < out.step_series.size(); ++i) {
    const StepSeriesRow& row = out.step_series[i];
    const StepRecord& rec = out.steps[i];
    ASSERT_EQ(row.replica, rec.replica) << i;
    ASSERT_EQ(row.step, rec.step) << i;
    EXPECT_EQ(row.start_ns, rec.start_ns) << i;
    EXPECT_EQ(row.start_ns + row.duration_ns, rec.end_ns) << i;
    EXPECT_EQ(row.num_seqs, static_cast<int32_t>(rec.seqs.size())) << i;
    int64_t prefill = 0, decode = 0;
    for (const auto& q : rec.seqs) (q.prefill ? prefill : decode) += q.new_tokens;
    EXPECT_EQ(row.prefill_tokens, prefill) << i;
    EXPECT_EQ(row.decode_tokens, decode) << i;
    EXPECT_GT(row.kv_blocks, 0) << i;
    EXPECT_LE(row.kv_owned_blocks + row.kv_cached_blocks, row.kv_blocks) << i;
    EXPECT_GE(row.kv_used_fraction_max, 0.0) << i;
    EXPECT_LE(row.kv_used_fraction_max, 1.0) << i;
    EXPECT_GE(static_cast<double>(row.wait_ns_max) + 1, row.wait_ns_mean) << i;
    if (auto it = last.find(row.replica); it != last.end()) {
      EXPECT_EQ(row.step, it->second->step + 1) << i;
      EXPECT_GE(row.start_ns, it->second->start_ns + it->second->duration_ns) << i;
    }
    last[row.replica] = &row;
  }
  EXPECT_EQ(last.size(), 2u);
  std::ostringstream os;
  write_steps_csv(os, out);
  std::istringstream is(os.str());
  std::string line;
  ASSERT_TRUE(std::getline(is, line));
  EXPECT_EQ(line.rfind("replica,step,start_ns,duration_ns,num_seqs,", 0), 0u) << line;
  const size_t columns = std::count(line.begin(), line.end(), ',') + 1;
  EXPECT_EQ(columns, 15u);
  size_t rows = 0;
  while (std::getline(is, line)) {
    ++rows;
    EXPECT_EQ(static_cast<size_t>(std::count(line.begin(), line.end(), ',')) + 1, columns);
  }
  EXPECT_EQ(rows, out.step_series.size());
}

TEST(OutputsTest, TwoRunsWriteByteIdenticalFiles) {
  const Scenario& sc = test_scenario("tiny_agent");
  auto write_all = [&sc]() {
    RunOptions opt = testing::keeping_requests();
    opt.record_steps = true;
    opt.record_max_steps = 200;
    opt.chrome_trace = true;
    opt.trace_start_ns = 0;
    opt.trace_end_ns = from_seconds(0.3);
    RunOutput out = run_scenario(sc, opt);
    std::ostringstream csv, trace, steps;
    write_requests_csv(csv, out);
    write_chrome_trace(trace, out);
    write_step_trace(steps, sc, out, sc.run.seed);
    return std::vector<std::string>{summary_json(sc, out, sc.run.seed).dump(2), csv.str(),
                                    trace.str(), steps.str()};
  };
  std::vector<std::string> a = write_all();
  std::vector<std::string> b = write_all();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_GT(a[i].size(), 100u) << i;
    EXPECT_TRUE(a[i] == b[i]) << "output " << i << " differs between two runs";
  }
}

}  // namespace
}  // namespace moesim::sim::output
