#include "sim/serving/step_model.h"

#include <algorithm>
#include <cmath>

#include "sim/core/check.h"

namespace moesim::sim {
namespace {

double bytes_per_param(DType d) { return bits_per_element(d) / 8.0; }

// x^k for a small integer k >= 0 by squaring (the hot path avoids std::pow).
double ipow(double x, int64_t k) {
  double r = 1.0;
  while (k > 0) {
    if (k & 1) r *= x;
    x *= x;
    k >>= 1;
  }
  return r;
}

// std::llround for 0 <= x < 2^52 without the libm call: half away from zero is truncation plus
// one when the fraction is >= 0.5 (the subtraction is exact in that range).
int64_t round_non_negative(double x) {
  const auto whole = static_cast<int64_t>(x);
  return whole + static_cast<int64_t>(x - static_cast<double>(whole) >= 0.5);
}

}  // namespace

double BackgroundTransfer::remaining_total() const {
  double t = 0;
  for (double b : remaining_bytes) t += b;
  return t;
}

StepModel::StepModel(const ModelCard& card, const Topology& topology,
                     const DeploymentSpec& deployment, std::vector<GpuId> gpus,
                     const ExpertPlacement* placement, const CostModel& cost, NetworkModel* network,
                     RoutingModel* routing)
    : card_(card),
      topology_(topology),
      deployment_(deployment),
      gpus_(std::move(gpus)),
      placement_(placement),
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
    MOESIM_CHECK(network_ && routing_ && placement_,
                 "MoE step model needs placement, network and routing models");
    MOESIM_CHECK(placement_->num_experts() == moe_->num_routed_experts,
                 "placement size differs from the number of experts");
    MOESIM_CHECK(placement_->num_gpus() == static_cast<int32_t>(gpus_.size()),
                 "placement GPUs differ from the replica's");
    experts_per_gpu_.assign(gpus_.size(), -1);  // -1: not seen yet
    expert_flops_per_token_ = expert_flops_per_token(*moe_, card_.hidden_size);
    expert_weight_bytes_ = expert_weight_bytes(card_, *moe_);
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
  dst_selections_.assign(n, 0);
  compute_s_.assign(n, 0);
  comm_s_.assign(n, 0);
  wait_s_.assign(n, 0);
  log1p_inv_experts_.assign(n, 0);
  token_counts_.gpus = gpus_;
}

double StepModel::seconds(OpKind kind, DType dtype, double flops, double bytes, int64_t tokens) {
  OpWork w;
  w.kind = kind;
  w.dtype = dtype;
  w.flops = flops;
  w.bytes = bytes;
  w.tokens = tokens;
  return cost_.seconds(w);
}

double StepModel::attention_seconds(int32_t attn_class, const std::vector<SeqSlice>& seqs,
                                    int64_t tokens) {
  if (tokens == 0) return 0.0;
  const AttentionSpec& a = attn_classes_[attn_class];
  const int64_t hidden = card_.hidden_size;
  const DType wdt = card_.precision.attention;
  const double tp = static_cast<double>(tp_);
  const double proj_flops = attention_projection_flops(a, hidden);
  const double weight_bytes = attention_params(a, hidden) * bytes_per_param(wdt) / tp;
  const double kv_per_token = kv_bytes_per_token(a, card_.precision.kv_cache) /
                              (a.kind == AttentionKind::kGQA
                                   ? static_cast<double>(std::min<int64_t>(tp_, a.gqa.num_kv_heads))
                                   : 1.0);
  const double state_bytes =
      recurrent_state_bytes_per_sequence(a, card_.precision.recurrent_state) / tp;
  // FLOP and byte conventions are the engine's (engine/op_cost.h, docs/calibration.md), so that
  // calibrated fits price the same work: activations read and written once (BF16), cache rows
  // read (context + new) and written (new), MLA's naive prefill up-projecting every cache row.
  const double act_bytes_per_token = 2.0 * static_cast<double>(hidden) * 2.0;
  const double mla_kv_up_params =
      a.kind == AttentionKind::kMLA
          ? static_cast<double>(a.mla.kv_lora_rank * a.mla.num_heads *
                                (a.mla.qk_nope_head_dim + a.mla.v_head_dim))
          : 0.0;

  // Prefill and decode parts are separate kernels.
  double pf_flops = 0, pf_bytes = 0, dc_flops = 0, dc_bytes = 0;
  int64_t pf_tokens = 0, dc_tokens = 0;
  for (const SeqSlice& s : seqs) {
    const double n = static_cast<double>(s.new_tokens);
    if (s.prefill) {
      // Token i of the chunk attends to context + i keys: the mean is context + (n + 1) / 2.
      int64_t mean_ctx = s.context_tokens + (s.new_tokens + 1) / 2;
      pf_flops += n * (proj_flops + attention_core_flops(a, mean_ctx, false) / 1.0) +
                  2.0 * mla_kv_up_params * static_cast<double>(s.context_tokens);
      pf_bytes += kv_per_token * static_cast<double>(s.context_tokens + 2 * s.new_tokens) +
                  n * act_bytes_per_token + 2.0 * state_bytes;
      pf_tokens += s.new_tokens;
    } else {
      dc_flops += n * (proj_flops + attention_core_flops(a, s.context_tokens + 1, true));
      dc_bytes += kv_per_token * static_cast<double>(s.context_tokens + 2) +
                  n * act_bytes_per_token + 2.0 * state_bytes;
      dc_tokens += s.new_tokens;
    }
  }
  OpKind pf_kind, dc_kind;
  switch (a.kind) {
    case AttentionKind::kMLA:
      pf_kind = OpKind::kAttnMlaPrefill;
      dc_kind = OpKind::kAttnMlaDecode;
      break;
    case AttentionKind::kGQA:
      pf_kind = OpKind::kAttnGqaPrefill;
      dc_kind = OpKind::kAttnGqaDecode;
      break;
    default:
      pf_kind = OpKind::kAttnKdaPrefill;
      dc_kind = OpKind::kAttnKdaDecode;
  }
  double s = 0;
  if (pf_tokens > 0) {
    s += seconds(pf_kind, wdt, pf_flops / tp, pf_bytes / tp + weight_bytes, pf_tokens);
  }
  if (dc_tokens > 0) {
    s += seconds(dc_kind, wdt, dc_flops / tp, dc_bytes / tp + weight_bytes, dc_tokens);
  }
  // Two RMSNorms per layer (before attention and before the FFN).
  const double norm_bytes = static_cast<double>(tokens) * static_cast<double>(hidden) * 4.0;
  s += 2.0 * seconds(OpKind::kRmsNorm, wdt, 4.0 * static_cast<double>(tokens * hidden), norm_bytes,
                     tokens);
  if (tp_ > 1) {
    // Ring all-reduce of the attention output over the TP group's NVLink.
    double bw = topology_.nvlink_bytes_per_s_per_gpu();
    double bytes = 2.0 * (tp - 1) / tp * static_cast<double>(tokens * hidden) * 2.0;
    if (bw > 0) s += bytes / bw;
  }
  return s;
}

const StepResult& StepModel::run(int64_t step_idx, const std::vector<std::vector<SeqSlice>>& ranks,
                                 StepObserver* observer) {
  const int32_t n = num_gpus();
  const int32_t num_classes = static_cast<int32_t>(attn_classes_.size());
  MOESIM_CHECK(static_cast<int32_t>(ranks.size()) == num_ranks(), "ranks size mismatch");
  std::fill(result_.compute_ns.begin(), result_.compute_ns.end(), 0);
  std::fill(result_.comm_ns.begin(), result_.comm_ns.end(), 0);
  std::fill(result_.wait_ns.begin(), result_.wait_ns.end(), 0);
  result_.dispatch_bytes = result_.combine_bytes = 0;
  result_.max_gpu_selections = result_.mean_gpu_selections = 0;
  std::fill(clock_s_.begin(), clock_s_.end(), 0.0);
  std::fill(compute_s_.begin(), compute_s_.end(), 0.0);
  std::fill(comm_s_.begin(), comm_s_.end(), 0.0);
  std::fill(wait_s_.begin(), wait_s_.end(), 0.0);
  std::vector<double>& compute_s = compute_s_;
  std::vector<double>& comm_s = comm_s_;
  std::vector<double>& wait_s = wait_s_;

  // Per-rank tokens and per-GPU attention cost for each layer class (equal layers cost alike).
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
  result_.duration_ns = 0;
  if (total_tokens == 0) return result_;

  // Unique tokens per (source, destination): every entry is written per MoE layer.
  token_counts_.tokens.resize(static_cast<size_t>(n) * n);
  token_counts_.tokens_per_src.assign(gpu_tokens_.begin(), gpu_tokens_.end());
  token_counts_.unique_node_tokens.clear();

  const int64_t hidden = card_.hidden_size;
  auto trace = [&](int32_t g, const char* name, int32_t layer, double start, double dur) {
    // Spans that round to 0 ns (float residue of equal clocks) are not reported.
    if (!observer) return;
    const SimTime dur_ns = from_seconds(dur);
    if (dur_ns > 0) observer->on_slice(g, name, layer, from_seconds(start), dur_ns);
  };

  for (int32_t li = 0; li < static_cast<int32_t>(layers_.size()); ++li) {
    const LayerInfo& info = layers_[li];
    const LayerSpec& spec = card_.layers[li];
    // Attention on every GPU.
    for (int32_t g = 0; g < n; ++g) {
      double a = attn_s_[static_cast<size_t>(g) * num_classes + info.attn_class];
      trace(g, "attention", li, clock_s_[g], a);
      clock_s_[g] += a;
      compute_s[g] += a;
    }
    if (!spec.ffn.is_moe) {
      const double w = 3.0 * static_cast<double>(hidden * spec.ffn.intermediate_size);
      for (int32_t g = 0; g < n; ++g) {
        // Dense FFN: every GPU of a TP group runs its weight shard on all of the rank's tokens.
        const int64_t t = rank_tokens_[g / tp_];
        if (t == 0) continue;
        double f = seconds(OpKind::kDenseFfn, card_.precision.dense_ffn,
                           static_cast<double>(t) * 2.0 * w / tp_,
                           w * bytes_per_param(card_.precision.dense_ffn) / tp_ +
                               static_cast<double>(t * hidden) * 4.0,
                           t);
        trace(g, "dense_ffn", li, clock_s_[g], f);
        clock_s_[g] += f;
        compute_s[g] += f;
      }
      continue;
    }
    const MoeSpec& m = spec.ffn.moe;
    const int64_t k = m.top_k;
    // Router and permutation on every GPU.
    for (int32_t g = 0; g < n; ++g) {
      int64_t t = gpu_tokens_[g];
      if (t == 0) continue;
      double r = seconds(OpKind::kRouter, card_.precision.shared_experts,
                         static_cast<double>(t) * router_flops(m, hidden),
                         static_cast<double>(hidden * m.num_routed_experts) * 2.0 +
                             static_cast<double>(t * hidden) * 2.0,
                         t) +
                 seconds(OpKind::kPermute, DType::kBF16, 0,
                         static_cast<double>(t * k * hidden) * 4.0, t * k);
      trace(g, "router", li, clock_s_[g], r);
      clock_s_[g] += r;
      compute_s[g] += r;
    }
    // Routing: selections per (source GPU, destination GPU).
    RoutingQuery q;
    q.step_idx = step_idx;
    q.moe_layer_idx = info.moe_idx;
    q.tokens_per_src = src_tokens_;
    if (placement_->has_replicas() && !routing_->reports_destinations()) {
      routing_->route(q, src_expert_);
      dispatcher_.dispatch(*placement_, src_expert_, src_dst_);
    } else {
      routing_->route_to_gpus(q, placement_->primary_gpu_of_expert(), n, src_dst_);
    }
    for (int32_t g = 0; g < n; ++g) {
      const int32_t slots = placement_->num_slots(g);
      if (slots == experts_per_gpu_[g]) continue;
      experts_per_gpu_[g] = slots;
      log1p_inv_experts_[g] = std::log1p(-1.0 / static_cast<double>(slots));
    }
    // Unique tokens per (source, destination) for the all-to-all.
    std::fill(dst_selections_.begin(), dst_selections_.end(), 0);
    for (int32_t s = 0; s < n; ++s) {
      int64_t* tokens = &token_counts_.tokens[static_cast<size_t>(s) * n];
      const double ts = static_cast<double>(gpu_tokens_[s]);
      if (ts == 0) {
        std::fill_n(tokens, n, 0);
        continue;
      }
      auto row = src_dst_.row(s);
      for (int32_t d = 0; d < n; ++d) {
        int32_t sel = row[d];
        dst_selections_[d] += sel;
        if (sel == 0) {
          tokens[d] = 0;
          continue;
        }
        double qsd = static_cast<double>(sel) / (ts * static_cast<double>(k));
        double uniq = ts * (1.0 - ipow(1.0 - std::min(qsd, 1.0), k));
        int64_t u = round_non_negative(uniq);
        u = std::clamp<int64_t>(u,
                                (sel + experts_per_gpu_[d] - 1) / std::max(1, experts_per_gpu_[d]),
                                std::min<int64_t>(sel, gpu_tokens_[s]));
        tokens[d] = u;
      }
    }
    // Dispatch: barrier, then the collective.
    double ready = *std::max_element(clock_s_.begin(), clock_s_.end());
    // One pass over the counts for both collectives (the unique (token, node) estimates of
    // hierarchical traffic included).
    plan_.build(topology_, token_counts_, deployment_.dispatch);
    plan_.dispatch_traffic(dispatch_row_bytes_, traffic_);
    if (background_) {
      // Background transfers ride along with the dispatch, chunk by chunk.
      for (BackgroundTransfer& t : *background_) {
        for (int32_t s = 0; s < n; ++s) {
          for (int32_t d = 0; d < n; ++d) {
            double& rem = t.remaining_bytes[static_cast<size_t>(s) * n + d];
            if (rem <= 0) continue;
            double x = std::min(rem, background_chunk_bytes_);
            traffic_.add_bytes(s, d, x);
            rem -= x;
          }
        }
      }
    }
    network_->run(traffic_, collective_);
    double dispatch_s = to_seconds(collective_.duration_ns);
    double dispatch_bytes = traffic_.total_bytes();
    // Routed and shared experts on every GPU.
    double max_sel = 0, sum_sel = 0;
    for (int32_t g = 0; g < n; ++g) {
      double sel = static_cast<double>(dst_selections_[g]);
      max_sel = std::max(max_sel, sel);
      sum_sel += sel;
      double e = 0;
      if (sel > 0) {
        double mexp = static_cast<double>(experts_per_gpu_[g]);
        // Expected distinct experts hit: m (1 - (1 - 1/m)^sel).
        double active = mexp * (1.0 - std::exp(sel * log1p_inv_experts_[g]));
        OpWork w;
        w.kind = OpKind::kExpertFfn;
        w.dtype = card_.precision.routed_experts;
        w.flops = sel * expert_flops_per_token_;
        // Weights of the active experts, token rows in and out (the intermediate activations
        // stay in registers / cache, as the engine counts them).
        w.bytes = active * expert_weight_bytes_ + sel * static_cast<double>(hidden) * 4.0;
        w.tokens = dst_selections_[g];
        w.num_experts = static_cast<int64_t>(std::ceil(active));
        e = cost_.seconds(w);
      }
      double sh = 0;
      int64_t t = gpu_tokens_[g];
      if (m.num_shared_experts > 0 && t > 0) {
        double w = 3.0 * static_cast<double>(hidden * m.shared_intermediate_size) *
                   static_cast<double>(m.num_shared_experts);
        sh = seconds(OpKind::kSharedExpert, card_.precision.shared_experts,
                     static_cast<double>(t) * 2.0 * w,
                     w * bytes_per_param(card_.precision.shared_experts) +
                         static_cast<double>(t * hidden) * 4.0,
                     t);
      }
      // Combine of t rows: reads t k expert outputs (and t shared-expert rows), writes t rows,
      // reads t k FP32 gate weights (engine/op_cost.h, combine_cost).
      const double cmb_rows = static_cast<double>(t * k + t * (m.num_shared_experts > 0 ? 2 : 1));
      double cmb =
          t > 0 ? seconds(OpKind::kCombine, DType::kBF16, static_cast<double>(t * k * hidden) * 2.0,
                          cmb_rows * static_cast<double>(hidden) * 2.0 +
                              4.0 * static_cast<double>(t * k),
                          t)
                : 0.0;
      ffn_s_[g] = e + sh + cmb;
    }
    result_.max_gpu_selections += max_sel;
    result_.mean_gpu_selections += sum_sel / n;
    plan_.combine_traffic(combine_row_bytes_, traffic_);
    double combine_bytes = traffic_.total_bytes();
    network_->run(traffic_, collective_);
    double combine_s = to_seconds(collective_.duration_ns);
    result_.dispatch_bytes += dispatch_bytes;
    result_.combine_bytes += combine_bytes;
    if (observer) observer->on_routing(li, info.moe_idx, src_dst_, dispatch_bytes, combine_bytes);

    if (!deployment_.microbatch_overlap) {
      for (int32_t g = 0; g < n; ++g) {
        double w = ready - clock_s_[g];
        trace(g, "wait", li, clock_s_[g], w);
        trace(g, "dispatch", li, ready, dispatch_s);
        wait_s[g] += w;
        comm_s[g] += dispatch_s;
        clock_s_[g] = ready + dispatch_s;
        trace(g, "experts", li, clock_s_[g], ffn_s_[g]);
        clock_s_[g] += ffn_s_[g];
        compute_s[g] += ffn_s_[g];
      }
      double ready2 = *std::max_element(clock_s_.begin(), clock_s_.end());
      for (int32_t g = 0; g < n; ++g) {
        double w = ready2 - clock_s_[g];
        trace(g, "wait", li, clock_s_[g], w);
        trace(g, "combine", li, ready2, combine_s);
        wait_s[g] += w;
        comm_s[g] += combine_s;
        clock_s_[g] = ready2 + combine_s;
      }
    } else {
      // Two half micro-batches: max(C, D) + min(C, D) / 2 from the layer's start barrier.
      double start = *std::min_element(clock_s_.begin(), clock_s_.end());
      double c = 0;
      for (int32_t g = 0; g < n; ++g) c = std::max(c, clock_s_[g] - start + ffn_s_[g]);
      double d = dispatch_s + combine_s;
      double end = start + std::max(c, d) + std::min(c, d) / 2.0;
      for (int32_t g = 0; g < n; ++g) {
        double busy = ffn_s_[g];
        trace(g, "experts", li, clock_s_[g], busy);
        trace(g, "dispatch+combine (overlapped)", li, start, d);
        compute_s[g] += busy;
        comm_s[g] += d;
        wait_s[g] += std::max(0.0, end - clock_s_[g] - busy - d);
        clock_s_[g] = end;
      }
    }
  }
  // Output head on every GPU for the sequences that emit a token.
  for (int32_t r = 0; r < num_ranks(); ++r) {
    int64_t emitting = static_cast<int64_t>(ranks[r].size());
    if (emitting == 0) continue;
    double w = static_cast<double>(hidden * card_.vocab_size);
    double h = seconds(OpKind::kLmHead, card_.precision.embeddings,
                       static_cast<double>(emitting) * 2.0 * w / tp_,
                       w * bytes_per_param(card_.precision.embeddings) / tp_, emitting);
    for (int32_t j = 0; j < tp_; ++j) {
      int32_t g = r * tp_ + j;
      trace(g, "lm_head", -1, clock_s_[g], h);
      clock_s_[g] += h;
      compute_s[g] += h;
    }
  }
  double end = *std::max_element(clock_s_.begin(), clock_s_.end());
  result_.duration_ns = std::max<SimTime>(1, from_seconds(end));
  for (int32_t g = 0; g < n; ++g) {
    wait_s[g] += end - clock_s_[g];
    result_.compute_ns[g] = from_seconds(compute_s[g]);
    result_.comm_ns[g] = from_seconds(comm_s[g]);
    result_.wait_ns[g] = from_seconds(wait_s[g]);
  }
  return result_;
}

}  // namespace moesim::sim
