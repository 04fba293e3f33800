// StepModel: construction, attention pricing and the timeline (clocks, barriers, the simple
// overlap formula, the output head). The MoE layer's routing, traffic and expert pricing are in
// step_model_moe.cc; the micro-batch timelines' pricing in step_model_microbatch.cc.
#include "sim/serving/step_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "sim/cost/op_formulas.h"

namespace moesim::sim {
namespace {

// A span of `dur_s` on GPU g for the observer (if any). Spans that round to 0 ns (float residue
// of equal clocks) are not reported, nor spans ending past the horizon: finish_step() refuses
// such a step.
void trace(StepObserver* observer, int32_t g, const char* name, int32_t layer_idx, double start_s,
           double dur_s) {
  if (!observer || !(start_s + dur_s <= kHorizonS)) return;
  // Both ends rounded, so that a span ending where the next one starts (the same clock value)
  // never overlaps it by a rounding nanosecond.
  const SimTime start_ns = from_seconds(start_s);
  const SimTime dur_ns = from_seconds(start_s + dur_s) - start_ns;
  if (dur_ns > 0) observer->on_slice(g, name, layer_idx, start_ns, dur_ns);
}

}  // namespace

double BackgroundTransfer::remaining_total() const {
  double t = 0;
  for (double b : remaining_bytes) t += b;
  return t;
}

StepModel::StepModel(const ModelCard& card, const Topology& topology,
                     const DeploymentSpec& deployment, std::vector<GpuId> gpus,
                     const LayerPlacements* placements, const CostModel& cost,
                     NetworkModel* network, RoutingModel* routing)
    : card_(card),
      topology_(topology),
      deployment_(deployment),
      gpus_(std::move(gpus)),
      placements_(placements),
      cost_(cost),
      network_(network),
      routing_(routing),
      tp_(deployment.attention == AttentionParallel::kTensor ? deployment.attention_tp : 1) {
  int32_t moe_idx = 0;
  for (const LayerSpec& l : card_.layers) {
    LayerInfo info;
    auto it = std::find(attn_classes_.begin(), attn_classes_.end(), l.attention);
    info.attn_class = static_cast<int32_t>(it - attn_classes_.begin());
    if (it == attn_classes_.end()) attn_classes_.push_back(l.attention);
    if (l.ffn.is_moe) {
      info.moe_idx = moe_idx++;
      if (!moe_) moe_ = &l.ffn.moe;
    } else if (!dense_ffn_) {
      dense_ffn_ = &l.ffn;
    }
    layers_.push_back(info);
  }
  if (moe_) {
    MOESIM_CHECK(network_ && routing_ && placements_,
                 "MoE step model needs placement, network and routing models");
    MOESIM_CHECK(placements_->num_layers() == moe_idx, "one placement per MoE layer");
    MOESIM_CHECK(placements_->num_experts() == moe_->num_routed_experts,
                 "placement size differs from the number of experts");
    MOESIM_CHECK(placements_->num_gpus() == static_cast<int32_t>(gpus_.size()),
                 "placement GPUs differ from the replica's");
    experts_per_gpu_.assign(gpus_.size(), -1);  // -1: not seen yet
    slot_balance_.assign(static_cast<size_t>(moe_idx), SlotBalance{});
    int64_t width = moe_->latent_dim > 0 ? moe_->latent_dim : card_.hidden_size;
    dispatch_row_bytes_ = token_bytes(width, deployment_.dispatch_dtype);
    combine_row_bytes_ = token_bytes(width, deployment_.combine_dtype);
  }
  size_t n = gpus_.size();
  result_.compute_ns.assign(n, 0);
  result_.comm_ns.assign(n, 0);
  result_.wait_ns.assign(n, 0);
  clock_s_.assign(n, 0);
  attn_s_.assign(n * attn_classes_.size(), 0);
  gpu_tokens_.assign(n, 0);
  rank_tokens_.assign(n, 0);
  src_tokens_.assign(n, 0);
  ffn_s_.assign(n, 0);
  routed_s_.assign(n, 0);
  shared_s_.assign(n, 0);
  if (moe_ && deployment_.overlap == OverlapMode::kTwoMicrobatch) {
    schedule_ = &two_microbatch_schedule();
  } else if (moe_ && deployment_.overlap == OverlapMode::kDecodePipeline) {
    schedule_ = &decode_pipeline_schedule();
  }
  if (schedule_) {
    for (int mb = 0; mb < 2; ++mb) {
      mb_gpu_tokens_[mb].assign(n, 0);
      mb_attn_s_[mb].assign(n * attn_classes_.size(), 0);
      mb_attn_prep_share_[mb].assign(n * attn_classes_.size(), 0);
    }
    timeline_totals_.compute_s.assign(n, 0);
    timeline_totals_.comm_s.assign(n, 0);
    timeline_totals_.wait_s.assign(n, 0);
  }
  dst_selections_.assign(n, 0);
  memo_allowed_ = !cost_.counts_queries();
  if (memo_allowed_) {
    token_ops_memo_.assign(n, TokenOpsMemo{});
    if (moe_) {
      expert_memo_ = std::make_shared<ExpertMemoTable>();
      expert_memo_->card = &card_;
      expert_memo_->cost = &cost_;
      expert_memo_->entries.assign(kExpertMemoSize, ExpertMemo{});
      expert_memo_entries_ = expert_memo_->entries.data();
    }
  }
  compute_s_.assign(n, 0);
  comm_s_.assign(n, 0);
  wait_s_.assign(n, 0);
  log1p_inv_experts_.assign(n, 0);
  token_counts_.gpus = gpus_;
}

double StepModel::attention_seconds(int32_t attn_class, const std::vector<SeqSlice>& seqs,
                                    int64_t tokens) {
  if (tokens == 0) return 0.0;
  const int64_t hidden = card_.hidden_size;
  const AttentionWork w =
      attention_work(attn_classes_[attn_class], hidden, card_.precision, tp_, seqs);
  double s = 0;
  if (w.prefill.tokens > 0) s += cost_.checked_seconds(w.prefill);
  if (w.decode.tokens > 0) s += cost_.checked_seconds(w.decode);
  // Two RMSNorms per layer (before attention and before the FFN).
  s += 2.0 * cost_.checked_seconds(rmsnorm_work(tokens, hidden, card_.precision.attention));
  if (tp_ > 1) {
    // Ring all-reduce of the attention output over the TP group's NVLink.
    const double bw = topology_.nvlink_bytes_per_s_per_gpu();
    const double bytes = attention_allreduce_bytes(tokens, hidden, tp_);
    if (bw > 0) s += bytes / bw;
  }
  return s;
}

void StepModel::share_expert_memo(std::shared_ptr<ExpertMemoTable> table) {
  MOESIM_CHECK(expert_memo_ && table && table->card == &card_ && table->cost == &cost_ &&
                   table->entries.size() == kExpertMemoSize,
               "an expert memo shared between models of different cards or cost models");
  expert_memo_ = std::move(table);
  expert_memo_entries_ = expert_memo_->entries.data();
}

void StepModel::begin_step() {
  std::fill(result_.compute_ns.begin(), result_.compute_ns.end(), 0);
  std::fill(result_.comm_ns.begin(), result_.comm_ns.end(), 0);
  std::fill(result_.wait_ns.begin(), result_.wait_ns.end(), 0);
  result_.duration_ns = 0;
  result_.draft_ns = 0;
  std::fill(result_.draft_gpu_busy_ns.begin(), result_.draft_gpu_busy_ns.end(), 0);
  if (track_nic_bytes_) {
    result_.nic_in_bytes.assign(gpus_.size(), 0.0);
    result_.nic_out_bytes.assign(gpus_.size(), 0.0);
  }
  static_cast<StepTotals&>(result_) = StepTotals{};
  std::fill(clock_s_.begin(), clock_s_.end(), 0.0);
  std::fill(compute_s_.begin(), compute_s_.end(), 0.0);
  std::fill(comm_s_.begin(), comm_s_.end(), 0.0);
  std::fill(wait_s_.begin(), wait_s_.end(), 0.0);
  region_size_ = 0;  // a step that threw may have left MoE layers untimed
}

int64_t StepModel::price_attention(const std::vector<std::vector<SeqSlice>>& ranks) {
  // Equal layers cost alike: attention is priced once per rank and layer class.
  const int32_t num_classes = static_cast<int32_t>(attn_classes_.size());
  int64_t total_tokens = 0;
  for (int32_t r = 0; r < num_ranks(); ++r) {
    int64_t tokens = 0;
    for (const SeqSlice& s : ranks[r]) tokens += s.new_tokens;
    total_tokens += tokens;
    rank_tokens_[r] = tokens;
    for (int32_t c = 0; c < num_classes; ++c) {
      double s = attention_seconds(c, ranks[r], tokens);
      for (int32_t j = 0; j < tp_; ++j)
        attn_s_[static_cast<size_t>(r * tp_ + j) * num_classes + c] = s;
    }
    for (int32_t j = 0; j < tp_; ++j) {
      // With TP attention the rank's tokens are split over its GPUs for the MoE part.
      int64_t share = tokens / tp_ + (j < tokens % tp_ ? 1 : 0);
      gpu_tokens_[r * tp_ + j] = share;
      src_tokens_[r * tp_ + j] = static_cast<int32_t>(share);
    }
  }
  ++tokens_version_;
  return total_tokens;
}

const StepModel::TokenOpsMemo& StepModel::refresh_token_ops(int32_t g, const MoeSpec& m) {
  TokenOpsMemo& memo = token_ops_memo_[g];
  const int64_t t = gpu_tokens_[g];
  // Priced as run_router() and price_experts() price them without the memo (t > 0).
  const int64_t hidden = card_.hidden_size;
  const bool has_shared = m.num_shared_experts > 0;
  const double router =
      cost_.checked_seconds(router_work(m, hidden, t, card_.precision.shared_experts));
  const double permute = cost_.checked_seconds(permute_work(t, m.top_k, hidden));
  memo.shared =
      has_shared
          ? cost_.checked_seconds(shared_expert_work(m, hidden, t, card_.precision.shared_experts))
          : 0.0;
  memo.combine = cost_.checked_seconds(combine_work(t, m.top_k, has_shared, hidden));
  memo.router_permute = router + permute;
  memo.tokens = t;
  return memo;
}

double StepModel::price_expert_seconds(int64_t selections, int32_t slots, double log1p_inv_slots) {
  const double active =
      expected_active_experts(static_cast<double>(selections), slots, log1p_inv_slots);
  return cost_.checked_seconds(expert_ffn_work(*moe_, card_.hidden_size,
                                               card_.precision.routed_experts, selections, active));
}

void StepModel::trace_compute(int32_t g, const char* name, int32_t layer_idx, double seconds,
                              StepObserver* observer) const {
  trace(observer, g, name, layer_idx, clock_s_[g], seconds);
}

const StepResult& StepModel::run(int64_t step_idx, const std::vector<std::vector<SeqSlice>>& ranks,
                                 StepObserver* observer) {
  MOESIM_CHECK(static_cast<int32_t>(ranks.size()) == num_ranks(), "ranks size mismatch");
  begin_step();
  step_tokens_ = price_attention(ranks);
  if (step_tokens_ == 0) return result_;

  // Unique tokens per (source, destination): every entry is written per MoE layer.
  const int32_t n = num_gpus();
  token_counts_.tokens.resize(static_cast<size_t>(n) * n);
  token_counts_.tokens_per_src.assign(gpu_tokens_.begin(), gpu_tokens_.end());
  token_counts_.unique_node_tokens.clear();

  const size_t num_classes = attn_classes_.size();
  if (schedule_) split_microbatches(ranks);
  for (int32_t li = 0; li < static_cast<int32_t>(layers_.size()); ++li) {
    const LayerInfo& info = layers_[li];
    if (schedule_ && info.moe_idx >= 0) {
      // Attention included: the layer's stages run on the micro-batch timeline.
      run_moe_layer(step_idx, li, observer);
      continue;
    }
    if (schedule_) flush_microbatch_region(observer);
    const FfnSpec& ffn = card_.layers[li].ffn;
    if (ffn.is_moe && !observer && memo_allowed_) {
      run_attention_and_router(info.attn_class, ffn.moe);
      run_moe_layer(step_idx, li, li, observer, /*router_run=*/true);
      continue;
    }
    for (int32_t g = 0; g < n; ++g) {
      advance_compute(g, "attention", li,
                      attn_s_[static_cast<size_t>(g) * num_classes + info.attn_class], observer);
    }
    if (ffn.is_moe) {
      run_moe_layer(step_idx, li, observer);
    } else {
      run_dense_ffn(li, ffn, observer);
    }
  }
  if (schedule_) flush_microbatch_region(observer);
  run_lm_head(ranks, observer);
  if (num_draft_tokens_ > 0) run_draft_passes(step_idx, ranks, observer);
  finish_step();
  return result_;
}

void StepModel::run_attention_and_router(int32_t attn_class, const MoeSpec& m) {
  // advance_compute(g, "attention", ...) then run_router()'s advance_compute(g, "router", ...).
  const int32_t n = num_gpus();
  const size_t num_classes = attn_classes_.size();
  use_token_ops_spec(m);
  double ready = -std::numeric_limits<double>::infinity();
  for (int32_t g = 0; g < n; ++g) {
    const double a = attn_s_[static_cast<size_t>(g) * num_classes + attn_class];
    double clock = clock_s_[g] + a;
    double compute = compute_s_[g] + a;
    if (gpu_tokens_[g] != 0) {
      const double r = token_ops(g, m).router_permute;
      clock += r;
      compute += r;
    }
    clock_s_[g] = clock;
    compute_s_[g] = compute;
    ready = std::max(ready, clock);
  }
  ready_s_ = ready;
}

void StepModel::run_dense_ffn(int32_t layer_idx, const FfnSpec& ffn, StepObserver* observer) {
  for (int32_t g = 0; g < num_gpus(); ++g) {
    // Dense FFN: every GPU of a TP group runs its weight shard on all of the rank's tokens.
    const int64_t t = rank_tokens_[g / tp_];
    if (t == 0) continue;
    const double f = cost_.checked_seconds(dense_ffn_work(
        t, card_.hidden_size, ffn.intermediate_size, tp_, card_.precision.dense_ffn));
    advance_compute(g, "dense_ffn", layer_idx, f, observer);
  }
}

void StepModel::advance_with_barriers(int32_t layer_idx, double dispatch_s, double combine_s,
                                      double ready, StepObserver* observer) {
  const int32_t n = num_gpus();
  if (!observer) {
    // The loops below in one pass: every GPU leaves the dispatch at `start`, and the latest one
    // to finish its experts is the one with the most expert seconds (rounding is monotone, so
    // max(start + f) = start + max(f) exactly). The same sums in the same order per GPU.
    const double start = ready + dispatch_s;
    const double ready2 = start + max_ffn_s_;
    const double end = ready2 + combine_s;
    for (int32_t g = 0; g < n; ++g) {
      wait_s_[g] += ready - clock_s_[g];
      comm_s_[g] += dispatch_s;
      compute_s_[g] += ffn_s_[g];
      wait_s_[g] += ready2 - (start + ffn_s_[g]);
      comm_s_[g] += combine_s;
      clock_s_[g] = end;
    }
    return;
  }
  for (int32_t g = 0; g < n; ++g) {
    double w = ready - clock_s_[g];
    trace(observer, g, "wait", layer_idx, clock_s_[g], w);
    trace(observer, g, "dispatch", layer_idx, ready, dispatch_s);
    wait_s_[g] += w;
    comm_s_[g] += dispatch_s;
    clock_s_[g] = ready + dispatch_s;
    advance_compute(g, "experts", layer_idx, ffn_s_[g], observer);
  }
  const double ready2 = *std::max_element(clock_s_.begin(), clock_s_.end());
  for (int32_t g = 0; g < n; ++g) {
    double w = ready2 - clock_s_[g];
    trace(observer, g, "wait", layer_idx, clock_s_[g], w);
    trace(observer, g, "combine", layer_idx, ready2, combine_s);
    wait_s_[g] += w;
    comm_s_[g] += combine_s;
    clock_s_[g] = ready2 + combine_s;
  }
}

void StepModel::advance_overlapped(int32_t layer_idx, double dispatch_s, double combine_s,
                                   StepObserver* observer) {
  // Two half micro-batches: max(C, D) + min(C, D) / 2 from the layer's start barrier.
  const int32_t n = num_gpus();
  const double start = *std::min_element(clock_s_.begin(), clock_s_.end());
  double c = 0;
  for (int32_t g = 0; g < n; ++g) c = std::max(c, clock_s_[g] - start + ffn_s_[g]);
  const double d = dispatch_s + combine_s;
  const double end = start + std::max(c, d) + std::min(c, d) / 2.0;
  for (int32_t g = 0; g < n; ++g) {
    const double busy = ffn_s_[g];
    trace(observer, g, "experts", layer_idx, clock_s_[g], busy);
    trace(observer, g, "dispatch+combine (overlapped)", layer_idx, start, d);
    compute_s_[g] += busy;
    comm_s_[g] += d;
    wait_s_[g] += std::max(0.0, end - clock_s_[g] - busy - d);
    clock_s_[g] = end;
  }
}

void StepModel::flush_microbatch_region(StepObserver* observer) {
  if (region_size_ == 0) return;
  for (std::vector<double>* v :
       {&timeline_totals_.compute_s, &timeline_totals_.comm_s, &timeline_totals_.wait_s}) {
    std::fill(v->begin(), v->end(), 0.0);
  }
  spans_.clear();
  run_microbatch_timeline(*schedule_,
                          std::span<const LayerStageCosts>(region_.data(), region_size_), clock_s_,
                          timeline_totals_, observer ? &spans_ : nullptr);
  region_size_ = 0;
  for (int32_t g = 0; g < num_gpus(); ++g) {
    compute_s_[g] += timeline_totals_.compute_s[g];
    comm_s_[g] += timeline_totals_.comm_s[g];
    wait_s_[g] += timeline_totals_.wait_s[g];
  }
  for (const TimelineSpan& sp : spans_) {
    trace(observer, sp.gpu, stage_span_name(sp.op, sp.mb), sp.layer_idx, sp.start_s, sp.duration_s);
  }
}

void StepModel::run_lm_head(const std::vector<std::vector<SeqSlice>>& ranks,
                            StepObserver* observer) {
  // Output head on every GPU for the sequences that emit a token.
  for (int32_t r = 0; r < num_ranks(); ++r) {
    // One row per sequence, and one per verified token of a speculative decode slice.
    int64_t emitting = static_cast<int64_t>(ranks[r].size());
    if (num_draft_tokens_ > 0) {
      for (const SeqSlice& sl : ranks[r]) emitting += sl.prefill ? 0 : sl.new_tokens - 1;
    }
    if (emitting == 0) continue;
    const double h = cost_.checked_seconds(lm_head_work(
        emitting, card_.hidden_size, card_.vocab_size, tp_, card_.precision.embeddings));
    for (int32_t j = 0; j < tp_; ++j) advance_compute(r * tp_ + j, "lm_head", -1, h, observer);
  }
}

void StepModel::finish_step() {
  const double end = *std::max_element(clock_s_.begin(), clock_s_.end());
  // Every op and collective was checked on its own; their sums are checked here. Each GPU's
  // compute, communication and wait sums are at most its clock, so `end` bounds them all.
  if (!within_horizon_s(end)) [[unlikely]] {
    throw_step_beyond_horizon(end);
  }
  result_.duration_ns = std::max<SimTime>(1, from_seconds(end));
  for (int32_t g = 0; g < num_gpus(); ++g) {
    wait_s_[g] += end - clock_s_[g];
    result_.compute_ns[g] = from_seconds(compute_s_[g]);
    result_.comm_ns[g] = from_seconds(comm_s_[g]);
    result_.wait_ns[g] = from_seconds(wait_s_[g]);
  }
}

void StepModel::throw_step_beyond_horizon(double end_s) const {
  const auto slowest =
      static_cast<size_t>(std::max_element(clock_s_.begin(), clock_s_.end()) - clock_s_.begin());
  throw_bad_duration("step model: a step of " + std::to_string(step_tokens_) + " tokens on " +
                         std::to_string(num_gpus()) + " GPUs over " +
                         std::to_string(layers_.size()) + " layers",
                     end_s,
                     "its slowest GPU computes for " + format_number(compute_s_[slowest]) +
                         " s and spends " + format_number(comm_s_[slowest]) +
                         " s in all-to-alls; check the topology's bandwidths "
                         "and " +
                         cost_.describe_inputs());
}

}  // namespace moesim::sim
