// The simulator's op work (sim/cost/op_formulas.h) against the engine's (engine/op_cost.h), op
// kind by op kind, over the shapes of the shipped model cards and a grid of token counts,
// contexts, expert loads and dtypes. Calibrated fits of engine measurements price simulator
// queries, so the two must count the same FLOPs and bytes for the same work.
//
// Three kinds of comparison, each written out where it applies:
//   - equal: the two count the same figures (up to the rounding of differently ordered sums);
//   - mapping: the conventions differ on purpose and docs/calibration.md ("Vocabulary and
//     FLOP/byte conventions") and sim/cost/calibrated_cost_model.h say how queries are adapted
//     (rmsnorm per norm vs both norms, permute standing for permute + unpermute, router and
//     permute index bytes, lm_head weights only, KDA's counted decay); the test applies it;
//   - drift: the two disagree without a documented reason. The test pins the difference's exact
//     formula (kDrift comments), so that a fix on either side shows up here as a failure that
//     asks for the pin to go.
// Activations are BF16 on both sides; dtypes compared are BF16 and FP8 (E4M3) weights and caches,
// the formats both sides know. Attention is compared at TP 1 (the engine runs one GPU's shard;
// the simulator's TP division is tested in op_work_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/dtype.h"
#include "engine/op_cost.h"
#include "sim/cost/op_formulas.h"
#include "sim/model/model_card.h"
#include "sim/model/model_card_parser.h"

namespace moesim {
namespace {

using engine::OpCost;

const std::string kSource = MOESIM_SOURCE_DIR;

// Both sides compute integer-valued figures far below 2^53, so equal counts are exactly equal;
// the tolerance only absorbs a reordered sum should one side change its evaluation order.
void expect_same(double sim_value, double engine_value, const std::string& what) {
  const double scale = std::max({1.0, std::abs(sim_value), std::abs(engine_value)});
  EXPECT_LE(std::abs(sim_value - engine_value), 1e-12 * scale)
      << what << ": sim " << sim_value << " engine " << engine_value;
}

engine::DType engine_dtype(sim::DType d) {
  switch (d) {
    case sim::DType::kFP32:
      return engine::DType::kF32;
    case sim::DType::kFP8:
      return engine::DType::kFP8E4M3;
    default:
      return engine::DType::kBF16;
  }
}

double bytes_of(sim::DType d) { return sim::bits_per_element(d) / 8.0; }

// kDrift: the engine stores FP8 weights with 8 bytes of FP32 scales per expert (or dense FFN),
// which the simulator does not count.
double fp8_scale_bytes(sim::DType weight) { return weight == sim::DType::kFP8 ? 8.0 : 0.0; }

constexpr sim::DType kWeightDtypes[] = {sim::DType::kBF16, sim::DType::kFP8};

// ---- Shapes ------------------------------------------------------------------------------------

std::vector<sim::ModelCard> shipped_cards() {
  std::vector<sim::ModelCard> cards;
  for (const char* name : {"tiny", "deepseek-v3", "deepseek-v3-slice", "kimi-k2", "kimi-k3",
                           "mixtral-8x7b", "qwen3-235b-a22b"}) {
    cards.push_back(sim::load_model_card(kSource + "/models/" + name + ".toml"));
  }
  return cards;
}

const std::vector<sim::ModelCard>& cards() {
  static const std::vector<sim::ModelCard> c = shipped_cards();
  return c;
}

// Distinct attention specs of all cards, with their hidden size (GQA with and without qk_norm:
// Qwen3 and Mixtral; MLA with and without query LoRA: DeepSeek-V3 and Kimi-K3).
struct AttentionCase {
  std::string name;
  sim::AttentionSpec spec;
  int64_t hidden = 0;
};

std::vector<AttentionCase> attention_cases() {
  std::vector<AttentionCase> out;
  for (const sim::ModelCard& c : cards()) {
    for (const sim::LayerSpec& l : c.layers) {
      const bool seen = std::any_of(out.begin(), out.end(), [&](const AttentionCase& a) {
        return a.spec == l.attention && a.hidden == c.hidden_size;
      });
      if (!seen) {
        out.push_back({c.name + "/" + std::string(sim::attention_kind_name(l.attention.kind)),
                       l.attention, c.hidden_size});
      }
    }
  }
  return out;
}

engine::MlaShape mla_shape(const sim::MlaSpec& m, int64_t hidden) {
  return {hidden,         m.num_heads,        m.q_lora_rank,
          m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim,
          m.v_head_dim};
}

engine::GqaShape gqa_shape(const sim::GqaSpec& g, int64_t hidden) {
  return {hidden, g.num_heads, g.num_kv_heads, g.head_dim, g.qk_norm};
}

engine::KdaShape kda_shape(const sim::KdaSpec& k, int64_t hidden) {
  return {hidden,           k.num_heads,  k.head_dim_k, k.head_dim_v, k.short_conv_kernel,
          k.gate_lora_rank, k.output_gate};
}

// Prefill batches (chunks of n new tokens over c cached ones; odd and even n) and decode batches
// (one new token per sequence).
std::vector<std::vector<sim::SeqSlice>> prefill_batches() {
  return {{{1, 0, true}},
          {{7, 0, true}},
          {{512, 0, true}},
          {{64, 4000, true}},
          {{4096, 0, true}, {33, 100, true}, {2, 131072, true}},
          {{8191, 24576, true}, {1, 1, true}}};
}

std::vector<std::vector<sim::SeqSlice>> decode_batches() {
  std::vector<std::vector<sim::SeqSlice>> b = {{{1, 0, false}}, {{1, 100, false}}};
  std::vector<sim::SeqSlice> mixed;
  for (int64_t i = 0; i < 64; ++i) mixed.push_back({1, 37 * i * i + i, false});
  b.push_back(mixed);
  b.push_back({{1, 1048575, false}, {1, 5, false}});
  return b;
}

engine::AttentionBatch engine_batch(const std::vector<sim::SeqSlice>& slices) {
  engine::AttentionBatch b;
  for (const sim::SeqSlice& s : slices) {
    b.new_tokens.push_back(s.new_tokens);
    b.context_tokens.push_back(s.context_tokens);
  }
  return b;
}

// ---- Attention ---------------------------------------------------------------------------------

// FLOPs of one attended query-key pair in the core (MLA naive / absorbed, GQA); 0 for KDA.
double flops_per_pair(const sim::AttentionSpec& a, bool absorbed) {
  switch (a.kind) {
    case sim::AttentionKind::kMLA: {
      const sim::MlaSpec& m = a.mla;
      const double per = absorbed ? 2.0 * m.kv_lora_rank + m.qk_rope_head_dim
                                  : double(m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim);
      return 2.0 * double(m.num_heads) * per;
    }
    case sim::AttentionKind::kGQA:
      return 4.0 * double(a.gqa.num_heads) * double(a.gqa.head_dim);
    case sim::AttentionKind::kKDA:
      return 0.0;
  }
  return 0.0;
}

// sim FLOPs - engine FLOPs for a batch, from the differences the test knows:
//   kDrift (pairs): the simulator prices a prefill chunk of n tokens at the integer mean context
//     c + (n + 1) / 2, i.e. n c + n floor((n + 1) / 2) pairs; the engine counts the exact
//     n c + n (n + 1) / 2. For even n the simulator is n / 2 pairs short.
//   mapping (KDA core): the simulator counts the decay, 7 H dk dv per token, the engine 6 H dk dv
//     (docs/calibration.md: "not adapted").
double expected_flops_difference(const sim::AttentionSpec& a, const std::vector<sim::SeqSlice>& b,
                                 bool prefill) {
  double diff = 0;
  for (const sim::SeqSlice& s : b) {
    if (prefill && s.new_tokens % 2 == 0) {
      diff -= flops_per_pair(a, false) * double(s.new_tokens / 2);
    }
    if (a.kind == sim::AttentionKind::kKDA) {
      diff += double(s.new_tokens) * double(a.kda.num_heads) * double(a.kda.head_dim_k) *
              double(a.kda.head_dim_v);
    }
  }
  return diff;
}

// sim bytes - engine bytes. kDrift (KDA): the simulator counts the per-head decay a_log and the
// per-channel dt_bias (H + H dk) at the attention weight dtype, the engine at FP32.
double expected_bytes_difference(const sim::AttentionSpec& a, sim::DType weight) {
  if (a.kind != sim::AttentionKind::kKDA) return 0.0;
  const double params = double(a.kda.num_heads) + double(a.kda.num_heads * a.kda.head_dim_k);
  return params * (bytes_of(weight) - 4.0);
}

OpCost engine_attention(const sim::AttentionSpec& a, int64_t hidden,
                        const std::vector<sim::SeqSlice>& slices, bool prefill, sim::DType weight,
                        sim::DType cache) {
  const engine::AttentionBatch batch = engine_batch(slices);
  const engine::DType w = engine_dtype(weight);
  const engine::DType c = engine_dtype(cache);
  const engine::DType act = engine::DType::kBF16;
  switch (a.kind) {
    case sim::AttentionKind::kMLA:
      return engine::mla_cost(mla_shape(a.mla, hidden), batch,
                              prefill ? engine::MlaForm::kNaive : engine::MlaForm::kAbsorbed, w, c,
                              act);
    case sim::AttentionKind::kGQA:
      return engine::gqa_cost(gqa_shape(a.gqa, hidden), batch, w, c, act);
    case sim::AttentionKind::kKDA:
      return engine::kda_cost(kda_shape(a.kda, hidden), batch, w, act);
  }
  return {};
}

TEST(OpWorkParity, AttentionPrefillAndDecodeOverShippedShapes) {
  const std::vector<AttentionCase> cases = attention_cases();
  int num_checked = 0;
  for (const AttentionCase& ac : cases) {
    for (sim::DType weight : kWeightDtypes) {
      for (sim::DType cache : kWeightDtypes) {
        sim::Precision p;
        p.attention = weight;
        p.kv_cache = cache;
        p.recurrent_state = sim::DType::kFP32;  // the engine's KDA state is FP32
        for (bool prefill : {true, false}) {
          for (const auto& slices : prefill ? prefill_batches() : decode_batches()) {
            const sim::AttentionWork work = sim::attention_work(ac.spec, ac.hidden, p, 1, slices);
            const sim::OpWork& w = prefill ? work.prefill : work.decode;
            EXPECT_TRUE((prefill ? work.decode : work.prefill).empty());
            const OpCost e = engine_attention(ac.spec, ac.hidden, slices, prefill, weight, cache);
            const std::string what = ac.name + (prefill ? " prefill" : " decode") +
                                     " w=" + std::string(sim::dtype_name(weight)) +
                                     " kv=" + std::string(sim::dtype_name(cache)) +
                                     " seqs=" + std::to_string(slices.size()) +
                                     " n0=" + std::to_string(slices[0].new_tokens);
            EXPECT_EQ(w.tokens, engine_batch(slices).total_new_tokens()) << what;
            EXPECT_EQ(std::string(sim::op_kind_name(w.kind)).substr(0, 5), "attn_") << what;
            expect_same(w.flops, e.flops + expected_flops_difference(ac.spec, slices, prefill),
                        what + " flops");
            expect_same(w.bytes, e.total_bytes() + expected_bytes_difference(ac.spec, weight),
                        what + " bytes");
            ++num_checked;
          }
        }
      }
    }
  }
  EXPECT_GE(num_checked, 300);
}

// The op-kind names the two sides share (the simulator has no "unpermute").
TEST(OpWorkParity, OpKindNamesAreTheEngines) {
  for (int i = 0; i < sim::kNumOpKinds; ++i) {
    const std::string_view name = sim::op_kind_name(static_cast<sim::OpKind>(i));
    EXPECT_TRUE(engine::op_kind_from_name(name).has_value()) << name;
  }
  EXPECT_EQ(engine::all_op_kinds().size(), static_cast<size_t>(sim::kNumOpKinds) + 1);
  EXPECT_FALSE(sim::op_kind_from_name("unpermute").has_value());
}

// ---- Norms, FFNs, MoE ops, head ----------------------------------------------------------------

constexpr int64_t kTokenCounts[] = {1, 3, 64, 1000, 8192};

std::vector<int64_t> hidden_sizes() {
  std::vector<int64_t> h;
  for (const sim::ModelCard& c : cards()) {
    if (std::find(h.begin(), h.end(), c.hidden_size) == h.end()) h.push_back(c.hidden_size);
  }
  return h;
}

TEST(OpWorkParity, RmsNormMapsOneNormToTheEnginesBoth) {
  for (int64_t hidden : hidden_sizes()) {
    for (int64_t t : kTokenCounts) {
      const sim::OpWork w = sim::rmsnorm_work(t, hidden, sim::DType::kBF16);
      // The engine's rmsnorm op is both norms of a layer: 2 T rows, 2 norm weights.
      const OpCost e = engine::rmsnorm_cost(2 * t, hidden, 2, engine::DType::kBF16);
      const std::string what = "rmsnorm h=" + std::to_string(hidden) + " t=" + std::to_string(t);
      EXPECT_EQ(w.tokens, t);
      // mapping: the simulator queries one norm and doubles its time; the calibrated model
      // prices the query at 2x its bytes; the norm weights (2 H act) are the engine's alone.
      expect_same(2.0 * w.bytes, e.activation_bytes, what + " activation bytes");
      expect_same(e.weight_bytes, 2.0 * double(hidden) * 2.0, what + " weight bytes");
      // kDrift: the simulator counts 4 T H FLOPs per norm, the engine (norms are elementwise)
      // none. Harmless for calibrated pricing (rmsnorm is fitted on bytes).
      EXPECT_EQ(e.flops, 0.0) << what;
      expect_same(w.flops, 4.0 * double(t) * double(hidden), what + " flops");
    }
  }
}

TEST(OpWorkParity, DenseFfnAndSharedExperts) {
  int num_checked = 0;
  for (const sim::ModelCard& c : cards()) {
    for (const sim::LayerSpec& l : c.layers) {
      for (sim::DType weight : kWeightDtypes) {
        for (int64_t t : kTokenCounts) {
          if (!l.ffn.is_moe) {
            for (int32_t tp : {1, 2, 4}) {
              // The engine runs one GPU's shard: intermediate / tp columns.
              if (l.ffn.intermediate_size % tp != 0) continue;
              const sim::OpWork w =
                  sim::dense_ffn_work(t, c.hidden_size, l.ffn.intermediate_size, tp, weight);
              const OpCost e = engine::ffn_cost({t}, c.hidden_size, l.ffn.intermediate_size / tp,
                                                engine_dtype(weight), engine::DType::kBF16);
              const std::string what =
                  c.name + " dense_ffn t=" + std::to_string(t) + " tp=" + std::to_string(tp);
              EXPECT_EQ(w.tokens, t);
              expect_same(w.flops, e.flops, what + " flops");
              // Each TP shard reads and writes all of the rank's rows, on both sides.
              expect_same(w.bytes + fp8_scale_bytes(weight), e.total_bytes(), what + " bytes");
              ++num_checked;
            }
            continue;
          }
          const sim::MoeSpec& m = l.ffn.moe;
          if (m.num_shared_experts == 0) continue;
          const sim::OpWork w = sim::shared_expert_work(m, c.hidden_size, t, weight);
          // The engine runs the shared experts as one FFN of num_shared x intermediate columns.
          const OpCost e = engine::ffn_cost({t}, c.hidden_size,
                                            m.num_shared_experts * m.shared_intermediate_size,
                                            engine_dtype(weight), engine::DType::kBF16);
          const std::string what = c.name + " shared_expert t=" + std::to_string(t);
          EXPECT_EQ(w.tokens, t);
          expect_same(w.flops, e.flops, what + " flops");
          expect_same(w.bytes + fp8_scale_bytes(weight), e.total_bytes(), what + " bytes");
          ++num_checked;
        }
      }
      if (l.ffn.is_moe) break;  // MoE layers of a card are alike
    }
  }
  EXPECT_GE(num_checked, 50);
}

// Loads of one GPU's local experts: token counts per expert, some experts idle.
std::vector<std::vector<int64_t>> expert_loads() {
  std::vector<std::vector<int64_t>> loads = {{1}, {0, 5, 0, 3}, {64, 64, 64, 64, 64, 64, 64, 64}};
  std::vector<int64_t> skewed;
  for (int64_t e = 0; e < 32; ++e) skewed.push_back(e % 3 == 0 ? 0 : 4096 / (e + 1));
  loads.push_back(skewed);
  return loads;
}

TEST(OpWorkParity, ExpertFfnWithTheEnginesActiveExperts) {
  int num_checked = 0;
  for (const sim::ModelCard& c : cards()) {
    const auto it = std::find_if(c.layers.begin(), c.layers.end(),
                                 [](const sim::LayerSpec& l) { return l.ffn.is_moe; });
    if (it == c.layers.end()) continue;
    const sim::MoeSpec& m = it->ffn.moe;
    ASSERT_EQ(m.latent_dim, 0) << c.name << ": the engine has no latent MoE";
    for (sim::DType weight : kWeightDtypes) {
      for (const std::vector<int64_t>& load : expert_loads()) {
        int64_t selections = 0, active = 0;
        for (int64_t n : load) {
          selections += n;
          active += n > 0 ? 1 : 0;
        }
        // The simulator's step model passes an expected active count (uniform spreading); given
        // the engine's exact count, the formulas must agree.
        const sim::OpWork w =
            sim::expert_ffn_work(m, c.hidden_size, weight, selections, double(active));
        const OpCost e = engine::ffn_cost(load, c.hidden_size, m.expert_intermediate_size,
                                          engine_dtype(weight), engine::DType::kBF16);
        const std::string what = c.name + " expert_ffn sel=" + std::to_string(selections) +
                                 " active=" + std::to_string(active);
        EXPECT_EQ(w.tokens, selections);
        EXPECT_EQ(w.num_experts, active);
        expect_same(w.flops, e.flops, what + " flops");
        expect_same(w.bytes + double(active) * fp8_scale_bytes(weight), e.total_bytes(),
                    what + " bytes");
        ++num_checked;
      }
    }
  }
  EXPECT_GE(num_checked, 40);
}

TEST(OpWorkParity, RouterPermuteAndCombine) {
  int num_checked = 0;
  for (const sim::ModelCard& c : cards()) {
    const auto it = std::find_if(c.layers.begin(), c.layers.end(),
                                 [](const sim::LayerSpec& l) { return l.ffn.is_moe; });
    if (it == c.layers.end()) continue;
    const sim::MoeSpec& m = it->ffn.moe;
    const int64_t h = c.hidden_size;
    const int64_t k = m.top_k;
    for (int64_t t : kTokenCounts) {
      const std::string what = c.name + " t=" + std::to_string(t);
      // Router. mapping (docs/calibration.md): the simulator does not count the 8 T top_k bytes
      // of the top-k ids and weights written; the engine's router weights are BF16 (its
      // activation dtype), as the simulator's 2 bytes per score weight.
      const sim::OpWork r = sim::router_work(m, h, t, c.precision.shared_experts);
      const OpCost er = engine::router_cost(t, h, m.num_routed_experts, k, engine::DType::kBF16,
                                            engine::DType::kBF16);
      EXPECT_EQ(r.tokens, t);
      expect_same(r.flops, er.flops, what + " router flops");
      expect_same(r.bytes + 8.0 * double(t * k), er.total_bytes(), what + " router bytes");

      // Permute. mapping: the simulator's permute stands for the engine's permute and unpermute
      // (the calibrated model sums both fits at the query's rows and bytes); each engine op
      // moves the query's bytes plus 4 N bytes of row indices.
      const sim::OpWork p = sim::permute_work(t, k, h);
      const OpCost ep = engine::permute_cost(t * k, h, engine::DType::kBF16);
      EXPECT_EQ(p.tokens, t * k);
      EXPECT_EQ(p.flops, ep.flops);
      expect_same(p.bytes + 4.0 * double(t * k), ep.total_bytes(), what + " permute bytes");

      // Combine: equal.
      for (bool shared : {false, true}) {
        const sim::OpWork w = sim::combine_work(t, k, shared, h);
        const OpCost e = engine::combine_cost(t, k, h, shared, engine::DType::kBF16);
        EXPECT_EQ(w.tokens, t);
        expect_same(w.flops, e.flops, what + " combine flops");
        expect_same(w.bytes, e.total_bytes(), what + " combine bytes");
      }
      ++num_checked;
    }
  }
  EXPECT_GE(num_checked, 30);
}

TEST(OpWorkParity, LmHeadCountsTheEnginesWeightBytes) {
  for (const sim::ModelCard& c : cards()) {
    for (int32_t tp : {1, 2, 8}) {
      if (c.vocab_size % tp != 0) continue;
      for (int64_t rows : kTokenCounts) {
        const sim::OpWork w =
            sim::lm_head_work(rows, c.hidden_size, c.vocab_size, tp, sim::DType::kBF16);
        // The engine runs one GPU's vocabulary shard.
        const OpCost e = engine::lm_head_cost(rows, c.hidden_size, c.vocab_size / tp,
                                              engine::DType::kBF16, engine::DType::kBF16);
        const std::string what =
            c.name + " lm_head rows=" + std::to_string(rows) + " tp=" + std::to_string(tp);
        EXPECT_EQ(w.tokens, rows);
        expect_same(w.flops, e.flops, what + " flops");
        // mapping: lm_head is fitted on FLOPs and weight bytes; the simulator counts the weights.
        expect_same(w.bytes, e.weight_bytes, what + " bytes");
      }
    }
  }
}

}  // namespace
}  // namespace moesim
