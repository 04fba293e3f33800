#include "engine/bench.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "engine/input_error.h"
#include "engine/layer_weights.h"
#include "engine/measurement.h"
#include "engine/op_cost.h"
#include "engine/permutation.h"
#include "engine/replay_plan.h"
#include "engine/timing.h"

namespace moesim::engine {

namespace {

struct BenchModel {
  int64_t hidden = 0;
  TraceLayer mla, gqa, kda, dense, moe;
  int64_t local_experts = 0;
};

BenchModel bench_model(const std::string& shapes) {
  BenchModel m;
  const bool tiny = shapes == "tiny";
  if (!tiny && shapes != "dsv3") {
    throw InputError("--shapes " + shapes + ": valid values are tiny and dsv3");
  }
  m.hidden = tiny ? 256 : 7168;
  m.mla.layer_idx = 0;
  m.mla.attention_kind = AttentionKind::kMla;
  m.mla.mla =
      tiny ? MlaShape{256, 8, 64, 64, 32, 16, 32} : MlaShape{7168, 128, 1536, 512, 128, 64, 128};
  m.gqa.layer_idx = 1;
  m.gqa.attention_kind = AttentionKind::kGqa;
  m.gqa.gqa = tiny ? GqaShape{256, 8, 2, 32, false} : GqaShape{7168, 64, 8, 128, false};
  m.kda.layer_idx = 2;
  m.kda.attention_kind = AttentionKind::kKda;
  m.kda.kda =
      tiny ? KdaShape{256, 8, 32, 32, 4, 32, true} : KdaShape{7168, 32, 128, 128, 4, 128, true};
  m.dense = m.mla;
  m.dense.layer_idx = 3;
  m.dense.intermediate_size = tiny ? 512 : 18432;
  m.moe = m.mla;
  m.moe.layer_idx = 4;
  m.moe.is_moe = true;
  m.moe.num_routed_experts = tiny ? 16 : 256;
  m.moe.top_k = tiny ? 2 : 8;
  m.moe.num_shared_experts = 1;
  m.moe.expert_intermediate_size = tiny ? 128 : 2048;
  m.moe.shared_intermediate_size = tiny ? 128 : 2048;
  m.moe.scoring = tiny ? ScoringFunc::kSoftmax : ScoringFunc::kSigmoid;
  m.local_experts = 8;
  return m;
}

std::string rate(double value, double scale) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", value / scale);
  return buf;
}

std::string peak(const std::optional<double>& v, double scale) {
  return v ? rate(*v, scale) : "n/a";
}

}  // namespace

namespace {

// What every bench point reads: the backend, the options and writers, the layers' weights and
// the buffers the points reuse (allocated once by run_bench).
struct BenchContext {
  Backend& backend;
  const BenchOptions& o;
  std::ostream& table;
  std::ostream* jsonl;
  const BenchModel& m;
  const ReplayDtypes& d;
  const LayerWeights& mla;
  const LayerWeights& gqa;
  const LayerWeights& kda;
  const LayerWeights& dense;
  const LayerWeights& moe;
  const DeviceTensor& x;
  const DeviceTensor& y;
  const DeviceTensor& state;
  const DeviceTensor& ids;
  const DeviceTensor& weights;
  const DeviceTensor& cache;
  int64_t cache_rows = 0;  // rows of `cache`
  int64_t row_bytes = 0;   // bytes of one cache row
};

Tensor view(const DeviceTensor& t, const Shape& shape) {
  return Tensor{t.view.data, t.view.dtype, shape};
}

// The table's header lines, and the JSONL measurement header when writing one.
void write_headers(const BenchContext& b) {
  const DevicePeaks& p = b.o.peaks;
  b.table << "backend " << b.backend.name() << " (" << b.backend.device_name() << "), shapes "
          << b.o.shapes << ", peaks: bf16 " << peak(p.bf16_flops_per_s, 1e12) << " TFLOP/s, fp8 "
          << peak(p.fp8_flops_per_s, 1e12) << " TFLOP/s, memory " << peak(p.memory_bytes_per_s, 1e9)
          << " GB/s\n";
  b.table << "op                 tokens  context      time_us   TFLOP/s      GB/s  peak_TFLOP/s  "
             "peak_GB/s\n";
  if (b.jsonl != nullptr) {
    MeasurementHeader header;
    header.mode = "bench";
    header.backend = b.backend.name();
    header.device = b.backend.device_name();
    header.peaks = p;
    header.engine_version = b.o.engine_version;
    header.model = b.o.shapes;
    header.warmup = b.o.warmup;
    header.repeats = b.o.repeats;
    header.estimator = "median";  // of the clean runs (point() below)
    header.max_extra_runs = b.o.repeats;
    MeasurementWriter(*b.jsonl).write_header(header);
  }
}

// Times `fn` and writes its table line (and JSONL record).
void point(const BenchContext& b, OpKind op, int64_t tokens, int64_t context, const OpCost& cost,
           const std::function<void()>& fn) {
  const DevicePeaks& p = b.o.peaks;
  TimingPolicy median;
  median.estimator = Estimator::kMedian;
  const TimingStats t = time_op(b.backend, b.o.warmup, b.o.repeats, fn, median);
  const double s = static_cast<double>(std::max<int64_t>(t.median_ns, 1)) * 1e-9;
  char line[160];
  std::snprintf(line, sizeof(line), "%-18s %7lld %8lld %12.1f %9s %9s %13s %10s\n",
                std::string(op_kind_name(op)).c_str(), static_cast<long long>(tokens),
                static_cast<long long>(context), t.median_ns * 1e-3,
                rate(cost.flops / s, 1e12).c_str(), rate(cost.total_bytes() / s, 1e9).c_str(),
                peak(p.bf16_flops_per_s, 1e12).c_str(), peak(p.memory_bytes_per_s, 1e9).c_str());
  b.table << line;
  if (b.jsonl != nullptr) {
    nlohmann::ordered_json j = {{"record", "bench"},
                                {"op", op_kind_name(op)},
                                {"tokens", tokens},
                                {"context_tokens", context},
                                {"flops", cost.flops},
                                {"bytes", cost.total_bytes()},
                                {"measured_ns", t.median_ns},
                                {"min_ns", t.min_ns},
                                {"max_ns", t.max_ns},
                                {"flops_per_s", cost.flops / s},
                                {"bytes_per_s", cost.total_bytes() / s}};
    *b.jsonl << j.dump() << '\n';
  }
}

// MLA and GQA prefill and decode of t tokens after c cached ones (a line saying so when the
// cache cannot hold them).
void mla_gqa_points(const BenchContext& b, int64_t t, int64_t c, const AttentionBatch& batch,
                    bool is_prefill, const Tensor& in, const Tensor& out) {
  const ReplayDtypes& d = b.d;
  const int64_t rows = batch.total_cache_rows();
  if (rows > b.cache_rows) {
    char line[200];
    std::snprintf(line, sizeof(line),
                  "%-18s %7lld %8lld  skipped: needs %.1f GB of cache, %.1f GB fit\n",
                  is_prefill ? "attn_*_prefill" : "attn_*_decode", static_cast<long long>(t),
                  static_cast<long long>(c), static_cast<double>(rows * b.row_bytes) * 1e-9,
                  static_cast<double>(b.cache_rows * b.row_bytes) * 1e-9);
    b.table << line;
    return;
  }
  const MlaShape& ms = b.m.mla.mla;
  const MlaForm form = is_prefill ? MlaForm::kNaive : MlaForm::kAbsorbed;
  const Tensor mla_cache = view(b.cache, {rows, ms.kv_lora_rank + ms.qk_rope_head_dim});
  point(b, is_prefill ? OpKind::kAttnMlaPrefill : OpKind::kAttnMlaDecode, t, c,
        mla_cost(ms, batch, form, d.attention, d.kv_cache, d.activations),
        [&] { b.backend.mla_attention(b.mla.mla, batch, form, in, mla_cache, out); });
  const GqaShape& gs = b.m.gqa.gqa;
  const Tensor kc = view(b.cache, {rows, gs.num_kv_heads * gs.head_dim});
  const Tensor vc{static_cast<char*>(b.cache.view.data) + kc.size_bytes(),
                  d.kv_cache,
                  {rows, gs.num_kv_heads * gs.head_dim}};
  point(b, is_prefill ? OpKind::kAttnGqaPrefill : OpKind::kAttnGqaDecode, t, c,
        gqa_cost(gs, batch, d.attention, d.kv_cache, d.activations),
        [&] { b.backend.gqa_attention(b.gqa.gqa, batch, in, kc, vc, out); });
}

// Attention of t tokens: MLA and GQA at every context, KDA (which does not depend on the
// context length) at the first.
void attention_points(const BenchContext& b, int64_t t, const Tensor& in, const Tensor& out) {
  const KdaShape& ks = b.m.kda.kda;
  for (int64_t c : b.o.contexts) {
    // Prefill: one sequence of t new tokens after c cached ones. Decode: t sequences.
    const AttentionBatch prefill{{t}, {c}};
    const AttentionBatch decode{std::vector<int64_t>(t, 1), std::vector<int64_t>(t, c)};
    mla_gqa_points(b, t, c, prefill, true, in, out);
    mla_gqa_points(b, t, c, decode, false, in, out);
    if (c != b.o.contexts.front()) continue;  // KDA does not depend on the context length
    for (const AttentionBatch* batch : {&prefill, &decode}) {
      const int64_t seqs = batch->num_sequences();
      const Tensor rec = view(b.state, {seqs, ks.num_heads, ks.head_dim_k, ks.head_dim_v});
      const Tensor conv{
          static_cast<char*>(b.state.view.data) + rec.size_bytes(),
          DType::kF32,
          {seqs, ks.short_conv_kernel - 1, ks.num_heads * (2 * ks.head_dim_k + ks.head_dim_v)}};
      point(b, batch == &prefill ? OpKind::kAttnKdaPrefill : OpKind::kAttnKdaDecode, t, c,
            kda_cost(ks, *batch, b.d.attention, b.d.activations), [&] {
              b.backend.kda_attention(b.kda.kda, *batch, in, KdaState{rec, conv}, out);
            });
    }
  }
}

// The FFN side of t tokens: dense FFN, router, permute, expert FFN and combine (t x top_k token
// copies spread evenly over the local experts).
void ffn_points(const BenchContext& b, int64_t t, const Tensor& in, const Tensor& out) {
  const ReplayDtypes& d = b.d;
  const BenchModel& m = b.m;
  const int64_t h = m.hidden;
  const int64_t k = m.moe.top_k;
  point(b, OpKind::kDenseFfn, t, 0,
        ffn_cost({t}, h, m.dense.intermediate_size, d.dense_ffn, d.activations),
        [&] { b.backend.expert_ffn(in, {t}, b.dense.dense, out); });
  const RouterConfig config{m.moe.num_routed_experts, k, m.moe.scoring, true, 1.0f};
  point(b, OpKind::kRouter, t, 0,
        router_cost(t, h, m.moe.num_routed_experts, k, d.activations, d.activations), [&] {
          b.backend.router(in, b.moe.router, config, view(b.ids, {t, k}), view(b.weights, {t, k}));
        });
  std::vector<int32_t> expert_ids(t * k);
  for (int64_t i = 0; i < t * k; ++i) expert_ids[i] = static_cast<int32_t>(i % m.local_experts);
  const Permutation perm = make_permutation(expert_ids, k, m.local_experts);
  DeviceTensor gather = upload_ints(b.backend, perm.gather_rows, {t * k}, "bench gather");
  const Tensor copies = view(b.y, {t * k, h});
  point(b, OpKind::kPermute, t * k, 0, permute_cost(t * k, h, d.activations),
        [&] { b.backend.permute(in, gather.view, copies); });
  const Tensor expert_in = view(b.x, {t * k, h});
  point(
      b, OpKind::kExpertFfn, t * k, 0,
      ffn_cost(perm.tokens_per_expert, h, m.moe.expert_intermediate_size, d.experts, d.activations),
      [&] { b.backend.expert_ffn(expert_in, perm.tokens_per_expert, b.moe.experts, copies); });
  point(b, OpKind::kCombine, t, 0, combine_cost(t, k, h, false, d.activations), [&] {
    b.backend.weighted_combine(view(b.x, {t, k, h}), view(b.weights, {t, k}), Tensor{}, out);
  });
}

}  // namespace

void run_bench(Backend& backend, const BenchOptions& o, std::ostream& table, std::ostream* jsonl) {
  if (o.tokens.empty() || o.contexts.empty())
    throw InputError("bench: empty token or context list");
  if (o.repeats < 1 || o.warmup < 0) throw InputError("bench: --repeats >= 1, --warmup >= 0");
  const BenchModel m = bench_model(o.shapes);
  const ReplayDtypes d;
  const int64_t h = m.hidden;
  int64_t max_tokens = 0, max_context = 0;
  for (int64_t t : o.tokens) max_tokens = std::max(max_tokens, t);
  for (int64_t c : o.contexts) max_context = std::max(max_context, c);
  if (max_tokens < 1) throw InputError("bench: token counts must be >= 1");

  const LayerWeights mla = build_layer_weights(backend, m.mla, 0, d, 11);
  const LayerWeights gqa = build_layer_weights(backend, m.gqa, 0, d, 12);
  const LayerWeights kda = build_layer_weights(backend, m.kda, 0, d, 13);
  const LayerWeights dense = build_layer_weights(backend, m.dense, 0, d, 14);
  const LayerWeights moe = build_layer_weights(backend, m.moe, m.local_experts, d, 15);
  const int64_t k = m.moe.top_k;
  // Cache rows of an attention point: prefill reads c + t rows, decode t x (c + 1).
  auto rows_needed = [](int64_t t, int64_t c) { return std::max(c + t, t * (c + 1)); };
  const int64_t cache_rows_wanted = rows_needed(max_tokens, max_context);
  const int64_t cache_width = std::max(m.mla.mla.kv_lora_rank + m.mla.mla.qk_rope_head_dim,
                                       2 * m.gqa.gqa.num_kv_heads * m.gqa.gqa.head_dim);
  const KdaShape& ks = m.kda.kda;
  const int64_t kda_state_per_seq =
      ks.num_heads * ks.head_dim_k * ks.head_dim_v +
      (ks.short_conv_kernel - 1) * ks.num_heads * (2 * ks.head_dim_k + ks.head_dim_v);
  DeviceTensor x = backend.allocate(d.activations, {max_tokens * k, h}, "bench input");
  DeviceTensor y = backend.allocate(d.activations, {max_tokens * k, h}, "bench output");
  DeviceTensor state =
      backend.allocate(DType::kF32, {max_tokens * kda_state_per_seq}, "bench state");
  DeviceTensor ids = backend.allocate(DType::kI32, {max_tokens * k}, "bench ids");
  DeviceTensor weights = backend.allocate(DType::kF32, {max_tokens * k}, "bench weights");
  // The cache takes what the largest point needs, or what memory allows after a reserve for the
  // ops' own scratch (a quarter of what is left, at least 2 GiB when there is that much): points
  // that need more rows are skipped with a line saying so (e.g. decode of 2,048 sequences at
  // 32K context would need ~290 GB of cache at dsv3 widths).
  const int64_t row_bytes = dtype_size_bytes(d.kv_cache) * cache_width;
  const int64_t free_bytes = backend.memory_info().available_bytes;
  const int64_t reserve_bytes =
      std::min(free_bytes / 2, std::max(free_bytes / 4, int64_t{2} << 30));
  const int64_t cache_rows = std::min(cache_rows_wanted, (free_bytes - reserve_bytes) / row_bytes);
  const int64_t smallest_rows =
      rows_needed(*std::min_element(o.tokens.begin(), o.tokens.end()),
                  *std::min_element(o.contexts.begin(), o.contexts.end()));
  if (cache_rows < smallest_rows) {
    throw OutOfMemoryError("bench cache", smallest_rows * row_bytes, free_bytes - reserve_bytes);
  }
  DeviceTensor cache = backend.allocate(d.kv_cache, {cache_rows * cache_width}, "bench cache");
  backend.fill_synthetic(x.view, 1, 1.0f);
  backend.fill_synthetic(cache.view, 2, 1.0f);
  backend.fill_synthetic(state.view, 3, 0.1f);
  backend.fill_synthetic(weights.view, 4, 0.5f);

  const BenchContext b{.backend = backend,
                       .o = o,
                       .table = table,
                       .jsonl = jsonl,
                       .m = m,
                       .d = d,
                       .mla = mla,
                       .gqa = gqa,
                       .kda = kda,
                       .dense = dense,
                       .moe = moe,
                       .x = x,
                       .y = y,
                       .state = state,
                       .ids = ids,
                       .weights = weights,
                       .cache = cache,
                       .cache_rows = cache_rows,
                       .row_bytes = row_bytes};
  write_headers(b);
  for (int64_t t : o.tokens) {
    const Tensor in = view(x, {t, h});
    const Tensor out = view(y, {t, h});
    point(b, OpKind::kRmsnorm, t, 0, rmsnorm_cost(t, h, 1, d.activations),
          [&] { backend.rmsnorm(in, mla.attn_norm, 1e-6f, out); });
    attention_points(b, t, in, out);
    ffn_points(b, t, in, out);
  }
}

}  // namespace moesim::engine
