// The compute part of the shipped public profile (profiles/h800-public.toml, [compute], fitted by
// `moesim calibrate` from DeepGEMM's and FlashMLA's published H800 figures, docs/calibration.md
// "Public profile: compute") reproduces every DeepGEMM row within 10%, composes DeepSeek-V3's
// expert and shared-expert FFNs from the table's GEMM pairs through the calibrated cost model,
// and prices DeepSeek-V3's MLA decode core at FlashMLA's published rates. In sample: the rows
// are the fit's own inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "sim/cost/calibrated_cost_model.h"
#include "sim/cost/op_formulas.h"
#include "sim/cost/profile.h"
#include "sim/cost/roofline.h"
#include "sim/model/model_card_parser.h"
#include "sim/topology/gpu_spec.h"
#include "tests/support/benchmark_table.h"

namespace moesim::sim {
namespace {

const std::string kSource = MOESIM_SOURCE_DIR;

struct Row {
  std::string layout;
  int64_t groups = 0, m = 0, n = 0, k = 0;
  double tflops = 0;
};

// layout,num_groups,m_per_group,n,k,tflops,...
std::vector<Row> read_table(const std::string& path) {
  std::vector<Row> rows;
  for (const auto& c : read_benchmark_rows(path, 6)) {
    rows.push_back({c[0], std::stoll(c[1]), std::stoll(c[2]), std::stoll(c[3]), std::stoll(c[4]),
                    std::stod(c[5])});
  }
  return rows;
}

double published_seconds(const Row& r) {
  return 2.0 * static_cast<double>(r.groups * r.m) * static_cast<double>(r.n * r.k) /
         (r.tflops * 1e12);
}

const Row* find_row(const std::vector<Row>& rows, const std::string& layout, int64_t groups,
                    int64_t m, int64_t n) {
  for (const Row& r : rows) {
    if (r.layout == layout && r.groups == groups && r.m == m && r.n == n) return &r;
  }
  return nullptr;
}

class PublicProfileCompute : public ::testing::Test {
 protected:
  void SetUp() override {
    profile_ = load_profile(kSource + "/profiles/h800-public.toml");
    gpu_ = *find_gpu_spec("h800-sxm");
    rows_ = read_table(kSource + "/profiles/h800-public.validation/deepgemm_fp8_h800.csv");
    card_ = load_model_card(kSource + "/models/deepseek-v3.toml");
  }
  CalibratedCostModel model() const {
    return CalibratedCostModel(
        profile_, std::make_unique<RooflineCostModel>(gpu_, RooflineParams::defaults()), gpu_);
  }
  CalibrationProfile profile_;
  GpuSpec gpu_;
  std::vector<Row> rows_;
  ModelCard card_;
};

TEST_F(PublicProfileCompute, EveryDeepGemmRowWithinTenPercent) {
  ASSERT_EQ(profile_.compute.gpu, "h800-sxm");
  ASSERT_EQ(rows_.size(), 16u);
  for (const Row& r : rows_) {
    GemmShape g;
    g.layout = *gemm_layout_from_name(r.layout);
    g.num_groups = static_cast<double>(r.groups);
    g.m_per_group = static_cast<double>(r.m);
    g.n = static_cast<double>(r.n);
    g.k = static_cast<double>(r.k);
    const GemmFit* fit = profile_.compute.find_gemm(g.layout, "fp8");
    ASSERT_NE(fit, nullptr) << r.layout;
    // The simulator picks a grouped layout by rows per group: it must pick the row's own.
    if (g.layout != GemmLayout::kDense) {
      EXPECT_EQ(profile_.compute.grouped_fit_for(g.m_per_group, "fp8"), fit) << r.layout << r.m;
    }
    const double s = fit->seconds(g, gpu_.fp8_flops_per_s, gpu_.hbm_bytes_per_s);
    const double tflops = g.flops() / s / 1e12;
    EXPECT_NEAR(tflops / r.tflops, 1.0, 0.10)
        << r.layout << " g=" << r.groups << " m=" << r.m << " n=" << r.n << " k=" << r.k
        << ": moesim " << tflops << " TFLOPS, published " << r.tflops;
  }
}

// DeepSeek-V3's routed expert (hidden 7168, intermediate 2048) is the table's pairs: gate/up
// n = 4096, k = 7168 and down n = 7168, k = 2048. expert_ffn_work priced by the calibrated cost
// model is the two GEMMs' fitted times: within 10% of the two published times' sum.
TEST_F(PublicProfileCompute, ExpertAndSharedFfnComposeTheTablePairs) {
  const CalibratedCostModel cost = model();
  const MoeSpec& moe = card_.layers.back().ffn.moe;
  ASSERT_EQ(moe.expert_intermediate_size, 2048);
  int checked = 0;
  for (const Row& up : rows_) {
    if (up.n != 4096) continue;
    const Row* down = find_row(rows_, up.layout, up.groups, up.m, 7168);
    ASSERT_NE(down, nullptr);
    const double published = published_seconds(up) + published_seconds(*down);
    const int64_t tokens = up.groups * up.m;
    OpWork w;
    if (up.layout == "dense") {
      w = shared_expert_work(moe, card_.hidden_size, tokens, DType::kFP8);
    } else {
      w = expert_ffn_work(moe, card_.hidden_size, DType::kFP8, tokens,
                          static_cast<double>(up.groups));
    }
    const double s = cost.seconds(w);
    EXPECT_NEAR(s / published, 1.0, 0.10)
        << up.layout << " g=" << up.groups << " m=" << up.m << ": moesim " << s * 1e6
        << " us, published " << published * 1e6 << " us";
    ++checked;
  }
  EXPECT_EQ(checked, 8);
  EXPECT_EQ(cost.num_out_of_range_queries(), 0);
}

// Kimi-K3's MXFP4 routed experts: weights read at 4.25 bits, activations FP8, computed at the
// FP4 peak where the GPU has one (GB200) and at the FP8 peak otherwise (H800: up-cast).
TEST_F(PublicProfileCompute, Mxfp4ExpertsReadFourBitsAndUpCastWithoutAnFp4Peak) {
  const ModelCard k3 = load_model_card(kSource + "/models/kimi-k3.toml");
  ASSERT_EQ(k3.precision.routed_experts, DType::kMXFP4);
  const MoeSpec& moe = k3.layers.back().ffn.moe;
  const OpWork w = expert_ffn_work(moe, k3.hidden_size, DType::kMXFP4, 2048, 4.0);
  const GemmFit* masked = profile_.compute.find_gemm(GemmLayout::kMaskedGrouped, "fp8");
  ASSERT_NE(masked, nullptr);
  auto by_hand = [&](const GpuSpec& gpu, double peak) {
    GemmShape g;
    g.layout = GemmLayout::kMaskedGrouped;
    g.num_groups = 4;
    g.m_per_group = 512;
    g.activation_bytes_per_element = 1.0;
    g.weight_bytes_per_element = 4.25 / 8.0;
    GemmShape up = g, down = g;
    up.n = 2.0 * static_cast<double>(moe.expert_intermediate_size);
    up.k = static_cast<double>(k3.hidden_size);
    down.n = static_cast<double>(k3.hidden_size);
    down.k = static_cast<double>(moe.expert_intermediate_size);
    return masked->seconds(up, peak, gpu.hbm_bytes_per_s) +
           masked->seconds(down, peak, gpu.hbm_bytes_per_s);
  };
  EXPECT_DOUBLE_EQ(model().seconds(w), by_hand(gpu_, gpu_.fp8_flops_per_s));
  const GpuSpec gb = *find_gpu_spec("gb200");
  ASSERT_GT(gb.fp4_flops_per_s, 0.0);
  const CalibratedCostModel on_gb(
      profile_, std::make_unique<RooflineCostModel>(gb, RooflineParams::defaults()), gb);
  EXPECT_DOUBLE_EQ(on_gb.seconds(w), by_hand(gb, gb.fp4_flops_per_s));
}

// A BF16 GEMM (Kimi-K3's shared expert): the profile has FP8 fits only, so the dense FP8
// efficiencies price it against the BF16 peak with 2-byte elements, counted as out of range.
TEST_F(PublicProfileCompute, Bf16GemmsUseTheFp8FitAgainstTheBf16PeakOutOfRange) {
  const ModelCard k3 = load_model_card(kSource + "/models/kimi-k3.toml");
  const MoeSpec& moe = k3.layers.back().ffn.moe;
  const OpWork w = shared_expert_work(moe, k3.hidden_size, 128, DType::kBF16);
  const GemmFit* dense = profile_.compute.find_gemm(GemmLayout::kDense, "fp8");
  ASSERT_NE(dense, nullptr);
  GemmShape g;
  g.m_per_group = 128;
  g.activation_bytes_per_element = 2.0;
  g.weight_bytes_per_element = 2.0;
  GemmShape up = g, down = g;
  const double i = static_cast<double>(moe.shared_intermediate_size * moe.num_shared_experts);
  up.n = 2.0 * i;
  up.k = static_cast<double>(k3.hidden_size);
  down.n = static_cast<double>(k3.hidden_size);
  down.k = i;
  const CalibratedCostModel cost = model();
  EXPECT_DOUBLE_EQ(cost.seconds(w),
                   dense->seconds(up, gpu_.bf16_flops_per_s, gpu_.hbm_bytes_per_s) +
                       dense->seconds(down, gpu_.bf16_flops_per_s, gpu_.hbm_bytes_per_s));
  EXPECT_EQ(cost.num_out_of_range_queries(OpKind::kSharedExpert), 1);
}

// FlashMLA's decode rates through the simulator's own attention work (DeepSeek-V3's MLA, 128
// sequences): the core's achieved rate equals the published figure within 10%.
TEST_F(PublicProfileCompute, MlaDecodeCoreAtFlashMlaRates) {
  const AttentionSpec& mla = card_.layers.front().attention;
  ASSERT_EQ(mla.kind, AttentionKind::kMLA);
  Precision p = card_.precision;
  ASSERT_EQ(p.core_attention, DType::kBF16);
  auto core_rate = [&](const AttentionSpec& a, const Precision& prec, int64_t context,
                       bool compute) {
    std::vector<SeqSlice> seqs(128, SeqSlice{1, context, false});
    const OpWork w = attention_work(a, card_.hidden_size, prec, 1, seqs).decode;
    const AttentionCoreFit* fit =
        profile_.compute.find_attention("attn_mla_decode", profile_dtype_name(prec.core_attention));
    EXPECT_NE(fit, nullptr);
    if (!fit) return 0.0;
    const double s =
        fit->seconds(w.core_flops, w.core_bytes, w.attended_pairs, static_cast<double>(w.tokens),
                     compute_peak_flops_per_s(gpu_, prec.core_attention), gpu_.hbm_bytes_per_s);
    return compute ? w.core_flops / s / 1e12 : w.core_bytes / s / 1e9;
  };
  // Compute-bound: all 128 heads on one GPU (data-parallel attention).
  EXPECT_NEAR(core_rate(mla, p, 4096, true) / 660.0, 1.0, 0.10);
  // Memory-bound: 16 query heads (FlashMLA's memory-bound setting, 128 heads over TP8).
  AttentionSpec mla16 = mla;
  mla16.mla.num_heads = 16;
  EXPECT_NEAR(core_rate(mla16, p, 4096, false) / 3000.0, 1.0, 0.10);
  // FlashMLA's sparse FP8 decode figure (DeepSeek-V3.2's sparse attention, BF16 math over an
  // FP8 cache) is no dense core's rate: no FP8 core is fitted from it.
  EXPECT_EQ(profile_.compute.find_attention("attn_mla_decode", "fp8"), nullptr);
}

// The whole decode attention op through the calibrated cost model: projections (one dense FP8
// GEMM) plus the core, in range, and the core alone is most of it at long context.
TEST_F(PublicProfileCompute, MlaDecodeOpIsProjectionsPlusCore) {
  const CalibratedCostModel cost = model();
  const AttentionSpec& mla = card_.layers.front().attention;
  std::vector<SeqSlice> seqs(128, SeqSlice{1, 4096, false});
  const OpWork w = attention_work(mla, card_.hidden_size, card_.precision, 1, seqs).decode;
  const double s = cost.seconds(w);
  const AttentionCoreFit* core = profile_.compute.find_attention("attn_mla_decode", "bf16");
  ASSERT_NE(core, nullptr);
  const double core_s =
      core->seconds(w.core_flops, w.core_bytes, w.attended_pairs, static_cast<double>(w.tokens),
                    gpu_.bf16_flops_per_s, gpu_.hbm_bytes_per_s);
  EXPECT_GT(s, core_s);
  EXPECT_LT(s, 1.5 * core_s);
  EXPECT_EQ(cost.num_out_of_range_queries(), 0);
}

// FlashAttention-3's causal forward rows (the prefill core fits' inputs, on H100 SXM5: the H800's
// compute die) through the fits: 16,384 queries attending seqlen / 2 keys each, FLOPs 4 x pairs
// x head dim x heads; every row within the fits' worst error, 6%.
TEST_F(PublicProfileCompute, EveryFlashAttentionCausalRowWithinSixPercent) {
  // kernel,dtype,head_dim,causal,seqlen,batch,heads,tflops,...
  const auto rows =
      read_benchmark_rows(kSource + "/profiles/h800-public.validation/flashattention3_h100.csv", 8);
  int checked = 0;
  for (const auto& c : rows) {
    const double d = std::stod(c[2]), s = std::stod(c[4]), b = std::stod(c[5]);
    const double heads = std::stod(c[6]), tflops = std::stod(c[7]);
    if (c[3] != "true" || d == 64) continue;
    const double queries = b * s, pairs = queries * s / 2, flops = 4 * pairs * d * heads;
    for (const char* kind : {"attn_gqa_prefill", "attn_mla_prefill"}) {
      if (d == 256 && std::string(kind) == "attn_gqa_prefill") continue;
      const AttentionCoreFit* fit = profile_.compute.find_attention(kind, "bf16");
      ASSERT_NE(fit, nullptr) << kind;
      const double t =
          fit->seconds(flops, 1.0, pairs, queries, gpu_.bf16_flops_per_s, gpu_.hbm_bytes_per_s);
      EXPECT_NEAR(flops / t / 1e12 / tflops, 1.0, 0.06)
          << kind << " head dim " << d << " seqlen " << s << ": moesim " << flops / t / 1e12
          << " TFLOPS, published " << tflops;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18);
}

// One prefill attention query by hand: a 4,096-token prompt of DeepSeek-V3 on one GPU
// (data-parallel attention). Projections: one dense FP8 GEMM of 4,096 rows (the dense fit's
// largest) writing 4,096 x 7,168 BF16 outputs, its other bytes at the fit's input efficiency.
// Core: 4,096 queries attending (4,096 + 1) / 2 = 2,048 keys each (integer), 2 x 128 heads x
// (128 + 64 + 128) FLOPs per pair, at the MLA prefill fit's efficiency of the BF16 peak with its
// fixed cost per query. Inside both fits' ranges.
TEST_F(PublicProfileCompute, MlaPrefillQueryByHand) {
  const CalibratedCostModel cost = model();
  const AttentionSpec& mla = card_.layers.front().attention;
  const std::vector<SeqSlice> seqs = {SeqSlice{4096, 0, true}};
  const OpWork w = attention_work(mla, card_.hidden_size, card_.precision, 1, seqs).prefill;
  ASSERT_EQ(w.kind, OpKind::kAttnMlaPrefill);
  const double t = 4096, h = 7168, pairs = 4096.0 * 2048;
  const double core_flops = pairs * 2 * 128 * (128 + 64 + 128);
  ASSERT_DOUBLE_EQ(w.attended_pairs, pairs);
  ASSERT_DOUBLE_EQ(w.core_flops, core_flops);
  const GemmFit* dense = profile_.compute.find_gemm(GemmLayout::kDense, "fp8");
  const AttentionCoreFit* core = profile_.compute.find_attention("attn_mla_prefill", "bf16");
  ASSERT_TRUE(dense && core);
  ASSERT_EQ(dense->m_per_group_max, 4096);
  ASSERT_TRUE(core->keys_per_query_min <= 2048 && 2048 <= core->keys_per_query_max);
  const double out_bytes = 2 * t * h;
  const double in_bytes = w.bytes - w.core_bytes - out_bytes;
  const double projections =
      (w.flops - core_flops) / (gpu_.fp8_flops_per_s * dense->compute_efficiency) +
      out_bytes / (gpu_.hbm_bytes_per_s * dense->output_bandwidth_efficiency) +
      in_bytes / (gpu_.hbm_bytes_per_s * dense->input_bandwidth_efficiency);
  const double core_s = core_flops * (1 + core->query_overhead_keys / 2048) /
                        (gpu_.bf16_flops_per_s * core->compute_efficiency);
  EXPECT_NEAR(cost.seconds(w) / (projections + core_s), 1.0, 1e-12);
  EXPECT_EQ(cost.num_out_of_range_queries(), 0);
  EXPECT_EQ(cost.num_by_rule_queries(OpKind::kAttnMlaPrefill), 0);
  // The core's rate lies between FlashAttention-3's causal rates at 4K (head dims 128 and 256,
  // 579 and 612 TFLOPS), within the fit's 6%.
  const double tflops = core_flops / core_s / 1e12;
  EXPECT_GT(tflops, 579 * 0.94);
  EXPECT_LT(tflops, 612 * 1.06);
}

// DeepSeek-V3's routed experts at 16K rows per expert (the EP32 prefill unit's 16K tokens per
// GPU, top-8 over 8 local experts), above the contiguous fit's 4,096-8,192 rows: priced by rule at
// the rate of 8,192 rows (twice the time of 8,192 rows per group), counted as by rule, not out of
// range. DeepGEMM's rows show the rate saturated: 4 x 8,192 and 8 x 4,096 rows run at the same
// TFLOPS (1,346 and 1,214).
TEST_F(PublicProfileCompute, ExpertFfnBeyondTheFittedRowsIsPricedByRuleAndCounted) {
  const CalibratedCostModel cost = model();
  const MoeSpec& moe = card_.layers.back().ffn.moe;
  const OpWork w = expert_ffn_work(moe, card_.hidden_size, DType::kFP8, 8 * 16384, 8.0);
  const GemmFit* contiguous = profile_.compute.find_gemm(GemmLayout::kContiguousGrouped, "fp8");
  ASSERT_NE(contiguous, nullptr);
  ASSERT_EQ(contiguous->m_per_group_max, 8192);
  GemmShape g;
  g.layout = GemmLayout::kContiguousGrouped;
  g.num_groups = 8;
  g.m_per_group = 8192;
  GemmShape up = g, down = g;
  up.n = 2.0 * static_cast<double>(moe.expert_intermediate_size);
  up.k = static_cast<double>(card_.hidden_size);
  down.n = static_cast<double>(card_.hidden_size);
  down.k = static_cast<double>(moe.expert_intermediate_size);
  const double at_8192 = contiguous->seconds(up, gpu_.fp8_flops_per_s, gpu_.hbm_bytes_per_s) +
                         contiguous->seconds(down, gpu_.fp8_flops_per_s, gpu_.hbm_bytes_per_s);
  EXPECT_NEAR(cost.seconds(w) / (2 * at_8192), 1.0, 1e-12);
  EXPECT_EQ(cost.num_by_rule_queries(OpKind::kExpertFfn), 1);
  EXPECT_EQ(cost.num_out_of_range_queries(), 0);
}

// An FP8 attention core is priced by its own dtype's dense kernel; the profile has none (the only
// public FP8 MLA figure is a sparse kernel), so the BF16 dense fit prices it, by rule: never
// slower than the BF16 core at the same shape (its cache bytes are fewer).
TEST_F(PublicProfileCompute, Fp8AttentionCoreIsNotSlowerThanBf16) {
  const CalibratedCostModel cost = model();
  const AttentionSpec& mla = card_.layers.front().attention;
  Precision bf16 = card_.precision;
  Precision fp8 = bf16;
  fp8.core_attention = DType::kFP8;
  fp8.kv_cache = DType::kFP8;
  const std::vector<SeqSlice> decode(128, SeqSlice{1, 4096, false});
  const std::vector<SeqSlice> prefill = {SeqSlice{4096, 0, true}};
  for (const auto* seqs : {&decode, &prefill}) {
    const AttentionWork b = attention_work(mla, card_.hidden_size, bf16, 1, *seqs);
    const AttentionWork f = attention_work(mla, card_.hidden_size, fp8, 1, *seqs);
    const OpWork& wb = seqs == &decode ? b.decode : b.prefill;
    const OpWork& wf = seqs == &decode ? f.decode : f.prefill;
    EXPECT_LE(cost.seconds(wf), cost.seconds(wb)) << op_kind_name(wb.kind);
    EXPECT_EQ(cost.num_by_rule_queries(wf.kind), 1) << op_kind_name(wb.kind);
  }
  EXPECT_EQ(cost.num_out_of_range_queries(), 0);
}

}  // namespace
}  // namespace moesim::sim
