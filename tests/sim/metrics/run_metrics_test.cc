// Run metrics: percentiles (numpy's linear interpolation), per-request latencies and the summary
// (counts, throughput, SLO attainment and goodput, busy fractions, KV high-water, imbalance).
#include "sim/metrics/run_metrics.h"

#include <gtest/gtest.h>

#include <vector>

namespace moesim::sim {
namespace {

TEST(PercentilesTest, LinearInterpolationLikeNumpy) {
  Percentiles p = percentiles({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(p.p50, 2.5);
  EXPECT_DOUBLE_EQ(p.p90, 3.7);
  EXPECT_DOUBLE_EQ(p.p99, 3.97);
  EXPECT_DOUBLE_EQ(p.mean, 2.5);
  EXPECT_DOUBLE_EQ(p.max, 4);
  EXPECT_EQ(p.count, 4);
}

TEST(PercentilesTest, OneValueAndNoValues) {
  Percentiles one = percentiles({7});
  EXPECT_DOUBLE_EQ(one.p50, 7);
  EXPECT_DOUBLE_EQ(one.p99, 7);
  EXPECT_EQ(one.count, 1);
  Percentiles none = percentiles({});
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.p50, 0);
  EXPECT_EQ(none.max, 0);
}

RequestRecord completed(SimTime arrival, SimTime scheduled, SimTime first, SimTime done,
                        int64_t prompt, int64_t generated) {
  RequestRecord r;
  r.outcome = RequestOutcome::kCompleted;
  r.arrival_ns = arrival;
  r.first_scheduled_ns = scheduled;
  r.first_token_ns = first;
  r.done_ns = done;
  r.prompt_tokens = prompt;
  r.output_tokens = generated;
  r.generated_tokens = generated;
  return r;
}

TEST(RequestRecordTest, Latencies) {
  RequestRecord r = completed(1'000'000, 3'000'000, 11'000'000, 51'000'000, 100, 5);
  EXPECT_EQ(r.queueing_ns(), 2'000'000);
  EXPECT_EQ(r.ttft_ns(), 10'000'000);
  EXPECT_EQ(r.e2e_ns(), 50'000'000);
  EXPECT_DOUBLE_EQ(r.tpot_ns(), 10'000'000.0);  // 40 ms over 4 tokens after the first
  RequestRecord one = completed(0, 0, 5, 5, 1, 1);
  EXPECT_EQ(one.tpot_ns(), -1);
  RequestRecord waiting;
  EXPECT_EQ(waiting.queueing_ns(), -1);
  EXPECT_EQ(waiting.ttft_ns(), -1);
  EXPECT_EQ(waiting.e2e_ns(), -1);
}

TEST(RequestOutcomeTest, Names) {
  EXPECT_STREQ(request_outcome_name(RequestOutcome::kCompleted), "completed");
  EXPECT_STREQ(request_outcome_name(RequestOutcome::kRejected), "rejected");
  EXPECT_STREQ(request_outcome_name(RequestOutcome::kInFlight), "in_flight");
}

TEST(SummarizeTest, CountsLatenciesThroughputAndSlo) {
  std::vector<RequestRecord> reqs;
  // Meets both SLOs (TTFT 10 ms, TPOT 10 ms).
  reqs.push_back(completed(0, 0, 10'000'000, 50'000'000, 100, 5));
  // TTFT 300 ms misses the 200 ms SLO.
  reqs.push_back(completed(0, 0, 300'000'000, 340'000'000, 200, 5));
  // TPOT 100 ms misses the 50 ms SLO.
  reqs.push_back(completed(0, 0, 10'000'000, 410'000'000, 300, 5));
  RequestRecord rejected;
  rejected.outcome = RequestOutcome::kRejected;
  rejected.prompt_tokens = 9999;
  reqs.push_back(rejected);
  RequestRecord running;
  running.outcome = RequestOutcome::kInFlight;
  running.first_scheduled_ns = 0;
  running.first_token_ns = 20'000'000;
  running.prompt_tokens = 400;
  running.generated_tokens = 3;
  reqs.push_back(running);
  RunCounters counters;
  counters.prompt_tokens_total = 1000;
  counters.prompt_tokens_cached = 250;
  RunSummary s = summarize(reqs, {}, counters, 2'000'000'000, 200, 50);
  EXPECT_EQ(s.num_arrived, 5);
  EXPECT_EQ(s.num_completed, 3);
  EXPECT_EQ(s.num_rejected, 1);
  EXPECT_EQ(s.num_in_flight, 1);
  EXPECT_DOUBLE_EQ(s.duration_s, 2.0);
  EXPECT_EQ(s.ttft_ms.count, 4);  // the running request has its first token
  EXPECT_EQ(s.e2e_ms.count, 3);
  EXPECT_EQ(s.tpot_ms.count, 3);
  EXPECT_DOUBLE_EQ(s.tpot_ms.max, 100.0);
  EXPECT_DOUBLE_EQ(s.e2e_ms.max, 410.0);
  EXPECT_EQ(s.slo.num_met, 1);
  // Decided: the three completed and the rejected one; the running one (TTFT 20 ms) is not.
  EXPECT_EQ(s.slo.num_decided, 4);
  EXPECT_TRUE(s.has.attainment);
  EXPECT_DOUBLE_EQ(s.slo.attainment, 1.0 / 4);
  EXPECT_DOUBLE_EQ(s.slo.goodput_req_per_s, 0.5);
  EXPECT_TRUE(s.has.rates);
  EXPECT_TRUE(s.has.prefix_cache);
  EXPECT_FALSE(s.has.max_wait_first_token);
  EXPECT_FALSE(s.has.gpu_time);
  EXPECT_FALSE(s.has.kv_pool);
  EXPECT_FALSE(s.has.expert_load);
  EXPECT_DOUBLE_EQ(s.requests_per_s, 1.5);
  // Input tokens of requests that produced a token; output tokens generated so far.
  EXPECT_DOUBLE_EQ(s.input_tokens_per_s, (100 + 200 + 300 + 400) / 2.0);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, (5 + 5 + 5 + 3) / 2.0);
  EXPECT_DOUBLE_EQ(s.prefix_cache_hit_rate, 0.25);
}

TEST(SummarizeTest, GpuFractionsHighWaterAndImbalance) {
  std::vector<GpuRecord> gpus(2);
  gpus[0].compute_ns = 500;
  gpus[0].comm_ns = 200;
  gpus[0].wait_ns = 100;
  gpus[0].num_kv_blocks = 100;
  gpus[0].kv_high_water_blocks = 30;
  gpus[1].compute_ns = 300;
  gpus[1].num_kv_blocks = 100;
  gpus[1].kv_high_water_blocks = 60;
  RunCounters counters;
  counters.max_gpu_selections_sum = 30;
  counters.mean_gpu_selections_sum = 20;
  RunSummary s = summarize({}, gpus, counters, 1000, 1, 1);
  EXPECT_DOUBLE_EQ(s.compute_fraction, 0.4);
  EXPECT_DOUBLE_EQ(s.comm_fraction, 0.1);
  EXPECT_DOUBLE_EQ(s.wait_fraction, 0.05);
  EXPECT_DOUBLE_EQ(s.kv_high_water_fraction, 0.6);
  EXPECT_DOUBLE_EQ(s.expert_imbalance, 0.5);
  EXPECT_TRUE(s.has.gpu_time);
  EXPECT_TRUE(s.has.kv_pool);
  EXPECT_TRUE(s.has.expert_load);
  // No request: no attainment, no percentiles, no prefix-cache rate (0 and flagged as no data).
  EXPECT_EQ(s.num_arrived, 0);
  EXPECT_FALSE(s.has.attainment);
  EXPECT_EQ(s.slo.attainment, 0.0);
  EXPECT_EQ(s.ttft_ms.count, 0);
  EXPECT_EQ(s.tpot_ms.count, 0);
  EXPECT_FALSE(s.has.prefix_cache);
  EXPECT_FALSE(s.has.max_wait_first_token);
  EXPECT_FALSE(s.has.gpu_balance);
  EXPECT_FALSE(s.has.slot_balance);
}

// Two (layer, step) samples by GPU: max 30 over mean 10 (r = 2, b = 1/3) and max 110 over mean
// 100 (r = 0.1, b = 10/11). The mean of the per-layer ratios (1.05) is not the ratio of the sums
// ((140 - 110) / 110, dominated by the busier layer); both are reported.
TEST(SummarizeTest, PerLayerBalanceIsTheMeanOfTheLayerRatios) {
  RunCounters counters;
  counters.max_gpu_selections_sum = 30 + 110;
  counters.mean_gpu_selections_sum = 10 + 100;
  counters.gpu_imbalance_sum = 2.0 + 0.1;
  counters.gpu_balancedness_sum = 1.0 / 3 + 10.0 / 11;
  counters.num_gpu_balance_samples = 2;
  counters.slot_imbalance_sum = 3.0 + 5.0 + 1.0;  // three samples by slot
  counters.slot_balancedness_sum = 0.25 + 1.0 / 6 + 0.5;
  counters.num_slot_balance_samples = 3;
  RunSummary s = summarize({}, {}, counters, 1000, 1, 1);
  EXPECT_TRUE(s.has.expert_load);
  EXPECT_DOUBLE_EQ(s.expert_imbalance, 30.0 / 110);
  EXPECT_TRUE(s.has.gpu_balance);
  EXPECT_DOUBLE_EQ(s.expert_gpu_imbalance_mean, 1.05);
  EXPECT_DOUBLE_EQ(s.expert_gpu_balancedness, (1.0 / 3 + 10.0 / 11) / 2);
  EXPECT_TRUE(s.has.slot_balance);
  EXPECT_DOUBLE_EQ(s.expert_slot_imbalance_mean, 3.0);
  EXPECT_DOUBLE_EQ(s.expert_slot_balancedness, (0.25 + 1.0 / 6 + 0.5) / 3);

  // Samples by GPU only (a routing model without expected shares on the fast path): the slot
  // figures have no data.
  counters.slot_imbalance_sum = counters.slot_balancedness_sum = 0;
  counters.num_slot_balance_samples = 0;
  RunSummary g = summarize({}, {}, counters, 1000, 1, 1);
  EXPECT_TRUE(g.has.gpu_balance);
  EXPECT_FALSE(g.has.slot_balance);
  EXPECT_EQ(g.expert_slot_imbalance_mean, 0.0);
  EXPECT_EQ(g.expert_slot_balancedness, 0.0);
}

// One definition of attainment for every command: met / (met + missed), missed including the
// rejected and the requests in flight past the TTFT limit.
TEST(SloStatusTest, MetMissedAndUndecided) {
  const SimTime end_ns = 1'000'000'000;  // the run ends at 1 s; limits TTFT 100 ms, TPOT 10 ms
  auto status = [&](const RequestRecord& r) { return slo_status(r, end_ns, 100, 10); };
  EXPECT_EQ(status(completed(0, 0, 50'000'000, 140'000'000, 10, 10)), SloStatus::kMet);
  EXPECT_EQ(status(completed(0, 0, 150'000'000, 200'000'000, 10, 10)), SloStatus::kMissed);
  EXPECT_EQ(status(completed(0, 0, 50'000'000, 500'000'000, 10, 10)), SloStatus::kMissed);
  EXPECT_EQ(status(completed(0, 0, 50'000'000, 50'000'000, 10, 1)), SloStatus::kMet);  // no TPOT
  RequestRecord rejected;
  rejected.outcome = RequestOutcome::kRejected;
  EXPECT_EQ(status(rejected), SloStatus::kMissed);
  RequestRecord queued;  // in flight without a first token
  queued.outcome = RequestOutcome::kInFlight;
  queued.arrival_ns = 950'000'000;  // waited 50 ms: may still make it
  EXPECT_EQ(status(queued), SloStatus::kUndecided);
  queued.arrival_ns = 800'000'000;  // waited 200 ms: missed
  EXPECT_EQ(status(queued), SloStatus::kMissed);
  RequestRecord decoding = queued;
  decoding.first_token_ns = 850'000'000;  // TTFT 50 ms
  EXPECT_EQ(status(decoding), SloStatus::kUndecided);
  decoding.first_token_ns = 950'000'000;  // TTFT 150 ms: missed already
  EXPECT_EQ(status(decoding), SloStatus::kMissed);

  std::vector<RequestRecord> reqs = {completed(0, 0, 50'000'000, 140'000'000, 10, 10), rejected,
                                     queued, decoding};
  reqs[2].arrival_ns = 950'000'000;
  SloCounts c = count_slo(reqs, end_ns, 100, 10);
  EXPECT_EQ(c.num_met, 1);
  EXPECT_EQ(c.num_decided, 3);
  RunSummary s = summarize(reqs, {}, {}, end_ns, 100, 10);
  EXPECT_EQ(s.slo.num_met, 1);
  EXPECT_EQ(s.slo.num_decided, 3);
  EXPECT_DOUBLE_EQ(s.slo.attainment, 1.0 / 3);
}

}  // namespace
}  // namespace moesim::sim

namespace moesim::sim {
namespace {

// Requests in flight without a first token are counted with their longest wait (at the end of
// the run); one that has its first token is not.
TEST(SummarizeTest, CountsRequestsWaitingForAFirstToken) {
  std::vector<RequestRecord> reqs(3);
  for (RequestRecord& r : reqs) r.outcome = RequestOutcome::kInFlight;
  reqs[0].arrival_ns = 500'000'000;  // queued for 1.5 s at the end
  reqs[1].arrival_ns = 1'800'000'000;
  reqs[1].first_scheduled_ns = 1'900'000'000;  // in prefill, no token yet
  reqs[2].arrival_ns = 0;
  reqs[2].first_token_ns = 100'000'000;  // decoding
  RunSummary s = summarize(reqs, {}, {}, 2'000'000'000, 200, 50);
  EXPECT_EQ(s.num_in_flight, 3);
  EXPECT_EQ(s.num_waiting_first_token, 2);
  EXPECT_TRUE(s.has.max_wait_first_token);
  EXPECT_DOUBLE_EQ(s.max_wait_first_token_ms, 1500.0);
}

}  // namespace
}  // namespace moesim::sim
