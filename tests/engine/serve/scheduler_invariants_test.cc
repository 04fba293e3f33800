// The serving scheduler on random workloads and configurations (fixed seeds): whatever the
// pressure, every step respects the budgets, max_seqs and the KV pools, a request's contexts
// follow its own earlier chunks, and every queued request ends with exactly its output tokens
// and one first token. Complements the hand-computed cases of scheduler_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "engine/serve/scheduler.h"

namespace moesim::engine::serve {
namespace {

struct Tracked {
  int64_t output_tokens = 0;
  int64_t emitted = 0;
  int64_t first_tokens = 0;
  int64_t kv_tokens = 0;  // what the scheduler should hold for it in KV
  bool finished = false;
};

// Adds the run's preemptions to `preemptions`.
void check_random_run(uint32_t seed, int64_t& preemptions) {
  std::mt19937 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  SchedulerConfig c;
  c.num_ranks = uniform(1, 3);
  c.max_seqs = uniform(1, 12);
  c.max_batch_tokens_per_gpu = uniform(16, 256);
  c.max_step_tokens = uniform(0, 1) == 0 ? -1 : uniform(8, 300);
  c.chunked_prefill = uniform(0, 3) != 0;
  c.kv_block_tokens = uniform(1, 32);
  c.kv_blocks_per_rank = uniform(8, 64);
  c.max_queued_requests = uniform(0, 1) == 0 ? -1 : uniform(1, 20);
  c.max_context_tokens = uniform(0, 1) == 0 ? 0 : uniform(100, 2000);
  Scheduler s(c);
  SCOPED_TRACE("seed " + std::to_string(seed));

  std::map<int64_t, Tracked> tracked;
  int64_t next_id = 0;
  for (int step = 0; step < 20000 && (step < 200 || !s.idle()); ++step) {
    if (step < 200) {
      for (int64_t k = uniform(0, 2); k > 0; --k) {
        const ServeRequest r{next_id++, step, uniform(1, 400), uniform(1, 40)};
        if (s.add(r) == AddResult::kQueued) tracked[r.request_id].output_tokens = r.output_tokens;
      }
    }
    const StepPlan plan = s.plan_step();
    for (int64_t id : plan.preempted) tracked.at(id).kv_tokens = 0;
    preemptions += static_cast<int64_t>(plan.preempted.size());
    std::vector<int64_t> decode_on(c.num_ranks, 0), prefill_on(c.num_ranks, 0);
    std::set<int64_t> seen;
    for (const PlannedSequence& p : plan.sequences) {
      ASSERT_TRUE(seen.insert(p.request_id).second) << "request twice in a step";
      ASSERT_GE(p.new_tokens, 1);
      Tracked& t = tracked.at(p.request_id);
      ASSERT_EQ(p.context_tokens, t.kv_tokens) << "request " << p.request_id;
      (p.prefill ? prefill_on : decode_on)[p.rank] += p.new_tokens;
    }
    int64_t decode_total = 0, prefill_total = 0;
    for (int32_t r = 0; r < c.num_ranks; ++r) {
      ASSERT_LE(prefill_on[r], std::max<int64_t>(0, c.max_batch_tokens_per_gpu - decode_on[r]))
          << "rank " << r << " over its budget";
      decode_total += decode_on[r];
      prefill_total += prefill_on[r];
      ASSERT_GE(s.free_blocks(r), 0);
      ASSERT_LE(s.free_blocks(r), c.kv_blocks_per_rank);
    }
    if (c.max_step_tokens > 0) {
      ASSERT_LE(prefill_total, std::max<int64_t>(0, c.max_step_tokens - decode_total));
    }
    ASSERT_LE(s.num_running(), c.max_seqs);
    if (plan.empty()) continue;
    const StepOutcome outcome = s.finish_step(plan);
    for (const PlannedSequence& p : plan.sequences) {
      Tracked& t = tracked.at(p.request_id);
      t.kv_tokens += p.new_tokens;
      t.emitted += p.emits_token ? 1 : 0;
    }
    for (int64_t id : outcome.first_token) ++tracked.at(id).first_tokens;
    for (int64_t id : outcome.finished) tracked.at(id).finished = true;
  }
  ASSERT_TRUE(s.idle()) << "not drained";
  for (int32_t r = 0; r < c.num_ranks; ++r) ASSERT_EQ(s.free_blocks(r), c.kv_blocks_per_rank);
  for (const auto& [id, t] : tracked) {
    ASSERT_TRUE(t.finished) << "request " << id;
    ASSERT_EQ(t.emitted, t.output_tokens) << "request " << id;
    ASSERT_EQ(t.first_tokens, 1) << "request " << id;
  }
}

TEST(SchedulerInvariants, RandomWorkloadsKeepEveryRule) {
  int64_t preemptions = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    check_random_run(seed, preemptions);
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(preemptions, 100);  // the pools are small enough to exercise recompute
}

}  // namespace
}  // namespace moesim::engine::serve
