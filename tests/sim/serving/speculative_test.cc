// Speculative decoding (sim/serving/speculative.h): the acceptance draws, the scheduler's
// verification slices and KV trimming, and whole runs of tests/data/scenarios/tiny_mtp.toml whose
// token accounting is computed by hand (acceptance 0 or 1 makes every draw certain).
#include "sim/serving/speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/model/model_card_parser.h"
#include "sim/serving/replica_scheduler.h"
#include "tests/sim/serving/test_scenarios.h"

namespace moesim::sim {
namespace {

using testing::expect_sane_run;
using testing::keeping_requests;
using testing::test_scenario;

SpeculativeSpec spec_of(std::vector<double> acceptance) {
  SpeculativeSpec s;
  s.enabled = true;
  s.num_draft_tokens = static_cast<int32_t>(acceptance.size());
  s.acceptance = std::move(acceptance);
  return s;
}

TEST(Speculative, CertainAcceptanceStopsAtTheFirstRejection) {
  RngStream rng(1, "test");
  const std::vector<double> acc = {1.0, 1.0, 0.0, 1.0};
  EXPECT_EQ(draw_accepted_drafts(acc, 4, rng), 2);
  EXPECT_EQ(draw_accepted_drafts(acc, 1, rng), 1);
  EXPECT_EQ(draw_accepted_drafts(acc, 0, rng), 0);
}

TEST(Speculative, DrawsOneUniformPerReachedPosition) {
  // acceptance 0.5 at both positions: accepted = number of leading draws below 0.5, from the
  // same stream read directly.
  RngStream rng(42, "speculative.accept"), copy(42, "speculative.accept");
  const std::vector<double> acc = {0.5, 0.5};
  for (int i = 0; i < 200; ++i) {
    int32_t expected = 0;
    while (expected < 2 && copy.uniform01() < 0.5) ++expected;
    ASSERT_EQ(draw_accepted_drafts(acc, 2, rng), expected) << "verification " << i;
  }
}

TEST(Speculative, TotalsCountCommittedAsAcceptedPlusOne) {
  RngStream rng(1, "test");
  DraftAcceptance a(spec_of({1.0, 0.0}), &rng);
  EXPECT_EQ(a.verify(2), 1);  // draft 1 accepted, draft 2 rejected
  EXPECT_EQ(a.verify(1), 1);
  EXPECT_EQ(a.verify(0), 0);
  a.add_step(100, 30);
  a.add_step(50, 0);
  const SpeculativeTotals& t = a.totals();
  EXPECT_EQ(t.num_verifications, 3);
  EXPECT_EQ(t.drafted_tokens, 3);
  EXPECT_EQ(t.accepted_tokens, 2);
  EXPECT_EQ(t.committed_tokens, 5);  // (1 + 1) + (1 + 1) + (0 + 1)
  EXPECT_EQ(t.position_offered, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(t.position_accepted, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(t.step_ns, 150);
  EXPECT_EQ(t.draft_ns, 30);
}

TEST(Speculative, NeverDraftsPastTheOutput) {
  EXPECT_EQ(drafts_for(3, 10), 3);
  EXPECT_EQ(drafts_for(3, 3), 2);
  EXPECT_EQ(drafts_for(3, 1), 0);
}

// The scheduler: a decode slice verifies 1 + k tokens with KV reserved for all of them; the
// rejected drafts' blocks are freed after the step.
TEST(Speculative, SchedulerReservesVerificationKvAndTrimsRejected) {
  SchedulerSpec sp;
  sp.max_seqs = 4;
  sp.max_batch_tokens_per_gpu = 256;
  sp.kv_block_tokens = 64;
  sp.prefix_caching = false;
  GpuMemoryLayout lay;
  lay.num_kv_blocks = 100;
  lay.kv_block_bytes = 1024;
  IdWindow<Seq> seqs;
  Seq s;
  s.sid = 0;
  s.req.prompt_tokens = 126;
  s.req.output_tokens = 10;
  s.prefill_target = 126;
  seqs.push_back(s);
  ReplicaScheduler sched(sp, 1, lay, &seqs);
  sched.set_draft_tokens(2);
  sched.enqueue(0);
  // Prefill: 126 tokens in 2 blocks; it emits the first token.
  ASSERT_EQ(sched.schedule(0).seqs.size(), 1u);
  seqs[0].prefilled = 126;
  seqs[0].generated = 1;
  EXPECT_EQ(sched.kv(0).free_blocks(), 98);
  // Decode: 1 + 2 tokens at positions 126..128 need 129 slots: a third block.
  const ScheduledBatch& b = sched.schedule(1);
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_FALSE(b.seqs[0].second.prefill);
  EXPECT_EQ(b.seqs[0].second.new_tokens, 3);
  EXPECT_EQ(b.seqs[0].second.context_tokens, 126);
  EXPECT_EQ(seqs[0].owned_blocks, 3);
  EXPECT_EQ(sched.kv(0).free_blocks(), 97);
  // Both drafts rejected: 1 token committed, 127 valid tokens fit 2 blocks; one is freed.
  seqs[0].generated += 1;
  EXPECT_EQ(sched.trim_to_committed(seqs[0]), 1);
  EXPECT_EQ(seqs[0].owned_blocks, 2);
  EXPECT_EQ(seqs[0].capacity_tokens, 128);
  EXPECT_EQ(sched.kv(0).free_blocks(), 98);
  // Next step reserves again; this time both drafts are accepted: 130 valid tokens keep 3.
  ASSERT_EQ(sched.schedule(2).seqs[0].second.new_tokens, 3);
  EXPECT_EQ(seqs[0].owned_blocks, 3);
  seqs[0].generated += 3;
  EXPECT_EQ(sched.trim_to_committed(seqs[0]), 0);
  EXPECT_EQ(sched.kv(0).free_blocks(), 97);
  // 5 generated, 5 to go: the slice drafts 2; at 9 generated it drafts none.
  seqs[0].generated = 9;
  EXPECT_EQ(sched.schedule(3).seqs[0].second.new_tokens, 1);
}

TEST(Speculative, RankBudgetBoundsTheVerifiedTokens) {
  SchedulerSpec sp;
  sp.max_batch_tokens_per_gpu = 2;
  sp.kv_block_tokens = 64;
  sp.prefix_caching = false;
  GpuMemoryLayout lay;
  lay.num_kv_blocks = 10;
  lay.kv_block_bytes = 1024;
  IdWindow<Seq> seqs;
  Seq s;
  s.sid = 0;
  s.req.prompt_tokens = 2;
  s.req.output_tokens = 10;
  s.prefill_target = 2;
  seqs.push_back(s);
  ReplicaScheduler sched(sp, 1, lay, &seqs);
  sched.set_draft_tokens(3);
  sched.enqueue(0);
  sched.schedule(0);
  seqs[0].prefilled = 2;
  seqs[0].generated = 1;
  EXPECT_EQ(sched.schedule(1).seqs[0].second.new_tokens, 2);  // 1 + 3 capped at the budget
}

// Whole runs: 16 requests of 10 output tokens, all completing. The prefill step emits the first
// token; the other 9 come from verifications.
struct RunCase {
  std::vector<double> acceptance;
  int64_t verifications, drafted, accepted;   // per request
  std::vector<int64_t> offered, accepted_at;  // per request and position
};

TEST(Speculative, RunAccountingMatchesHandComputedCounts) {
  const std::vector<RunCase> cases = {
      // Remaining 9, 6, 3: 3 verifications of 2 drafts, all accepted (3 tokens each).
      {{1.0, 1.0}, 3, 6, 6, {3, 3}, {3, 3}},
      // Remaining 9, 7, 5, 3: 2 tokens each (draft 1 accepted, draft 2 rejected), then 1 with
      // no draft.
      {{1.0, 0.0}, 5, 8, 4, {4, 4}, {4, 0}},
      // Every draft rejected: 9 verifications drafting min(2, remaining - 1): 2 x 7, 1, 0.
      {{0.0, 0.0}, 9, 15, 0, {8, 0}, {0, 0}},
  };
  for (const RunCase& c : cases) {
    SCOPED_TRACE("acceptance " + std::to_string(c.acceptance[0]) + ", " +
                 std::to_string(c.acceptance[1]));
    Scenario sc = test_scenario("tiny_mtp");
    sc.speculative.acceptance = c.acceptance;
    const RunOutput out = run_scenario(sc, keeping_requests());
    expect_sane_run(out, "tiny_mtp");
    ASSERT_EQ(out.summary.num_completed, 16);
    EXPECT_EQ(out.counters.num_preemptions, 0);
    const SpeculativeTotals& t = out.speculative;
    EXPECT_EQ(t.num_verifications, 16 * c.verifications);
    EXPECT_EQ(t.drafted_tokens, 16 * c.drafted);
    EXPECT_EQ(t.accepted_tokens, 16 * c.accepted);
    EXPECT_EQ(t.committed_tokens, t.accepted_tokens + t.num_verifications);
    EXPECT_EQ(t.committed_tokens, 16 * 9);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(t.position_offered[i], 16 * c.offered[i]);
      EXPECT_EQ(t.position_accepted[i], 16 * c.accepted_at[i]);
    }
    EXPECT_GT(t.draft_ns, 0);
    EXPECT_LT(t.draft_ns, t.step_ns);
    for (const RequestRecord& r : out.requests) EXPECT_EQ(r.generated_tokens, 10);
  }
}

TEST(Speculative, AcceptanceByDomainReplacesTheTableForItsRequests) {
  // Every request of the tiny workload is "chat": its own table rejects every draft, so the run
  // commits as the {0, 0} case (9 verifications per request, one token each) whatever the
  // default table says; another domain's table changes nothing.
  Scenario sc = test_scenario("tiny_mtp");
  sc.speculative.acceptance = {1.0, 1.0};
  sc.speculative.acceptance_by_domain[static_cast<int>(Domain::kChat)] = {0.0, 0.0};
  sc.speculative.acceptance_by_domain[static_cast<int>(Domain::kCode)] = {0.5, 0.5};
  const RunOutput out = run_scenario(sc, keeping_requests());
  expect_sane_run(out, "tiny_mtp by domain");
  const SpeculativeTotals& t = out.speculative;
  EXPECT_EQ(t.num_verifications, 16 * 9);
  EXPECT_EQ(t.accepted_tokens, 0);
  EXPECT_EQ(t.verifications_by_domain[static_cast<int>(Domain::kChat)], 16 * 9);
  EXPECT_EQ(t.committed_by_domain[static_cast<int>(Domain::kChat)], 16 * 9);
  EXPECT_EQ(t.verifications_by_domain[static_cast<int>(Domain::kCode)], 0);
}

TEST(Speculative, AcceptingMoreTakesFewerStepsAndIsDeterministic) {
  Scenario all = test_scenario("tiny_mtp");
  Scenario none = all;
  none.speculative.acceptance = {0.0, 0.0};
  Scenario off = all;
  off.speculative = SpeculativeSpec{};
  const RunOutput a = run_scenario(all, RunOptions{});
  const RunOutput n = run_scenario(none, RunOptions{});
  const RunOutput o = run_scenario(off, RunOptions{});
  EXPECT_LT(a.counters.num_steps, o.counters.num_steps);
  EXPECT_EQ(o.speculative.num_verifications, 0);
  // Rejecting everything commits one token per step like no speculation, at a higher step cost.
  EXPECT_GT(n.summary.tpot_ms.mean, o.summary.tpot_ms.mean);
  EXPECT_LT(a.summary.tpot_ms.mean, n.summary.tpot_ms.mean);
  // A random acceptance: the same seed gives the same digest and totals.
  Scenario half = all;
  half.speculative.acceptance = {0.7, 0.5};
  const RunOutput h1 = run_scenario(half, RunOptions{});
  const RunOutput h2 = run_scenario(half, RunOptions{});
  EXPECT_EQ(h1.digest, h2.digest);
  EXPECT_EQ(h1.speculative.accepted_tokens, h2.speculative.accepted_tokens);
  EXPECT_GT(h1.speculative.accepted_tokens, 0);
  EXPECT_LT(h1.speculative.accepted_tokens, h1.speculative.drafted_tokens);
}

TEST(Speculative, DraftModelCommitsTheSameAndTakesItsMemory) {
  // The tiny dense model drafting for the tiny MTP model: the acceptance accounting of the MTP
  // case {1.0, 0.0} (per request 5 verifications, 8 drafts, 4 accepted), the draft model's
  // weights on every GPU.
  Scenario sc = test_scenario("tiny_mtp");
  sc.speculative.acceptance = {1.0, 0.0};
  sc.speculative.method = SpeculativeMethod::kDraftModel;
  sc.speculative.draft_model = std::make_shared<const ModelCard>(
      load_model_card(testing::kScenarioDir + "models/tiny-dense.toml"));
  const RunOutput out = run_scenario(sc, keeping_requests());
  expect_sane_run(out, "tiny_mtp with a draft model");
  ASSERT_EQ(out.summary.num_completed, 16);
  EXPECT_EQ(out.speculative.num_verifications, 16 * 5);
  EXPECT_EQ(out.speculative.drafted_tokens, 16 * 8);
  EXPECT_EQ(out.speculative.accepted_tokens, 16 * 4);
  EXPECT_GT(out.speculative.draft_ns, 0);
  Scenario off = test_scenario("tiny_mtp");
  off.speculative = SpeculativeSpec{};
  const RunOutput base = run_scenario(off, RunOptions{});
  EXPECT_DOUBLE_EQ(out.gpus.front().weight_bytes - base.gpus.front().weight_bytes,
                   total_weight_bytes(*sc.speculative.draft_model));
}

TEST(Speculative, DraftModelOnItsOwnGpus) {
  // Four target GPUs and two draft GPUs (4, 5) of the 8-GPU node: the same acceptance accounting
  // as co-located; the draft weights on the draft GPUs only; the draft GPUs busy in part of every
  // step; the target's KV pool capped to what the draft GPUs hold the draft KV of.
  Scenario sc = test_scenario("tiny_mtp");
  sc.deployment.gpus_per_replica = 4;
  sc.speculative.acceptance = {1.0, 0.0};
  sc.speculative.method = SpeculativeMethod::kDraftModel;
  sc.speculative.draft_model = std::make_shared<const ModelCard>(
      load_model_card(testing::kScenarioDir + "models/tiny-dense.toml"));
  sc.speculative.draft_gpus = 2;
  const RunOutput out = run_scenario(sc, keeping_requests());
  expect_sane_run(out, "tiny_mtp with a draft model on its own GPUs");
  ASSERT_EQ(out.summary.num_completed, 16);
  EXPECT_EQ(out.speculative.num_verifications, 16 * 5);
  EXPECT_EQ(out.speculative.accepted_tokens, 16 * 4);
  const SpeculativeTotals& t = out.speculative;
  EXPECT_GT(t.draft_gpu_busy_ns, 0);
  EXPECT_LT(t.draft_gpu_busy_ns, t.draft_gpu_step_ns);
  ASSERT_EQ(out.gpus.size(), 6u);
  const double draft_weights = total_weight_bytes(*sc.speculative.draft_model);
  Scenario off = sc;
  off.speculative = SpeculativeSpec{};
  const RunOutput base = run_scenario(off, RunOptions{});
  EXPECT_DOUBLE_EQ(out.gpus[0].weight_bytes, base.gpus[0].weight_bytes);
  for (size_t g = 4; g < 6; ++g) {
    EXPECT_EQ(out.gpus[g].gpu, static_cast<int32_t>(g));
    EXPECT_DOUBLE_EQ(out.gpus[g].weight_bytes, draft_weights);
    EXPECT_GT(out.gpus[g].compute_ns, 0);
    EXPECT_EQ(out.gpus[g].num_kv_blocks, 0);
  }
  // Every KV block of the 4 ranks needs its draft KV on one of the 2 draft GPUs.
  const double hbm = static_cast<double>(sc.topology->gpu_spec().hbm_bytes);
  const double room = hbm * (1 - sc.scheduler.hbm_reserve_fraction) -
                      sc.scheduler.workspace_gib * (1LL << 30) - draft_weights;
  const double per_block = kv_bytes_per_token(*sc.speculative.draft_model) *
                           static_cast<double>(sc.scheduler.kv_block_tokens) * 4 / 2;
  EXPECT_EQ(out.gpus[0].num_kv_blocks, static_cast<int64_t>(std::floor(room / per_block)));
  EXPECT_LT(out.gpus[0].num_kv_blocks, base.gpus[0].num_kv_blocks);
}

TEST(Speculative, MtpModuleTakesWeightsAndKv) {
  // The tiny model's last layer: MLA (kv_lora 64 + rope 16 latent, BF16 cache = 160 bytes per
  // token) and a MoE FFN; one module adds its KV per token.
  const Scenario& sc = test_scenario("tiny_mtp");
  const DraftMemory m = mtp_draft_memory(*sc.model, 1, 2);
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token, 160.0);
  EXPECT_GT(m.weight_bytes, 0.0);
  const DraftMemory more = mtp_draft_memory(*sc.model, 1, 3);
  // One more routed expert slot: 3 x 256 x 128 parameters at the experts' precision.
  const double expert_bytes =
      3.0 * 256 * 128 * weight_bits_per_element(sc.model->precision, TensorGroup::kRoutedExperts) /
      8.0;
  EXPECT_DOUBLE_EQ(more.weight_bytes - m.weight_bytes, expert_bytes);
}

}  // namespace
}  // namespace moesim::sim
