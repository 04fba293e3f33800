#include "engine/replay_plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "engine/input_error.h"

namespace moesim::engine {

namespace {

// Everything that determines a layer's shapes (not its index).
std::string layer_signature(const TraceLayer& l) {
  std::ostringstream s;
  s << attention_kind_name(l.attention_kind) << ':';
  switch (l.attention_kind) {
    case AttentionKind::kMla:
      s << l.mla.num_heads << ',' << l.mla.q_lora_rank << ',' << l.mla.kv_lora_rank << ','
        << l.mla.qk_nope_head_dim << ',' << l.mla.qk_rope_head_dim << ',' << l.mla.v_head_dim;
      break;
    case AttentionKind::kGqa:
      s << l.gqa.num_heads << ',' << l.gqa.num_kv_heads << ',' << l.gqa.head_dim << ','
        << l.gqa.qk_norm;
      break;
    case AttentionKind::kKda:
      s << l.kda.num_heads << ',' << l.kda.head_dim_k << ',' << l.kda.head_dim_v << ','
        << l.kda.short_conv_kernel << ',' << l.kda.gate_lora_rank << ',' << l.kda.output_gate;
      break;
  }
  if (l.is_moe) {
    s << "|moe:" << l.num_routed_experts << ',' << l.top_k << ',' << l.num_shared_experts << ','
      << l.expert_intermediate_size << ',' << l.shared_intermediate_size << ','
      << static_cast<int>(l.scoring);
  } else {
    s << "|dense:" << l.intermediate_size;
  }
  return s.str();
}

DType bf16_unless_fp32(const std::string& name) {
  return name == "fp32" ? DType::kF32 : DType::kBF16;
}

bool is_8bit_or_less(const std::string& name) {
  return name == "fp8" || name == "mxfp8" || name == "mxfp4" || name == "nvfp4";
}

// Sizes are computed in long double (integers exact up to 2^64 on x86-64) and saturate at
// INT64_MAX on the way back: a trace whose buffers would pass int64 bytes is refused as out of
// memory, never wrapped into a small size.
using Wide = long double;
Wide bytes(DType d, Wide elements) { return elements * dtype_size_bytes(d); }
int64_t saturated(Wide x) {
  return x < 0x1p63L ? static_cast<int64_t>(x) : std::numeric_limits<int64_t>::max();
}
void add_saturating(int64_t& sum, int64_t x) {
  if (__builtin_add_overflow(sum, x, &sum)) sum = std::numeric_limits<int64_t>::max();
}

}  // namespace

std::vector<LayerRun> select_layers(const std::string& profile, const TraceModel& model) {
  const int64_t num_layers = static_cast<int64_t>(model.layers.size());
  std::vector<LayerRun> runs;
  if (profile == "all") {
    for (int64_t i = 0; i < num_layers; ++i) runs.push_back({i, 1});
  } else if (profile == "sample") {
    std::map<std::string, size_t> index_of;
    for (const TraceLayer& l : model.layers) {
      const std::string sig = layer_signature(l);
      auto it = index_of.find(sig);
      if (it == index_of.end()) {
        index_of[sig] = runs.size();
        runs.push_back({l.layer_idx, 1});
      } else {
        ++runs[it->second].scale;
      }
    }
  } else if (profile.rfind("every:", 0) == 0) {
    int64_t n = 0;
    try {
      size_t used = 0;
      n = std::stoll(profile.substr(6), &used);
      if (used != profile.size() - 6) n = 0;
    } catch (const std::exception&) {
      n = 0;
    }
    if (n < 1) throw InputError("--layers " + profile + ": N in every:N must be an integer >= 1");
    for (int64_t i = 0; i < num_layers; i += n) runs.push_back({i, std::min(n, num_layers - i)});
  } else {
    std::stringstream ss(profile);
    std::string item;
    while (std::getline(ss, item, ',')) {
      int64_t idx = -1;
      try {
        size_t used = 0;
        idx = std::stoll(item, &used);
        if (used != item.size()) idx = -1;
      } catch (const std::exception&) {
        idx = -1;
      }
      if (idx < 0) {
        throw InputError("--layers " + profile +
                         ": unknown profile (valid: all, sample, every:N, "
                         "or a list of layer indices)");
      }
      if (idx >= num_layers) {
        throw InputError("--layers " + profile + ": layer " + std::to_string(idx) +
                         " does not exist (model '" + model.name + "' has " +
                         std::to_string(num_layers) + " layers)");
      }
      for (const LayerRun& r : runs) {
        if (r.layer_idx == idx) throw InputError("--layers " + profile + ": layer listed twice");
      }
      runs.push_back({idx, 1});
    }
    std::sort(runs.begin(), runs.end(),
              [](const LayerRun& a, const LayerRun& b) { return a.layer_idx < b.layer_idx; });
  }
  if (runs.empty()) throw InputError("--layers " + profile + ": selects no layer");
  return runs;
}

std::vector<int64_t> routed_tokens_per_gpu(const StepTrace& trace) {
  std::vector<int64_t> tokens(trace.topology.num_gpus, 0);
  for (const TraceStep& step : trace.steps) {
    for (const TraceMoeLayer& l : step.moe_layers) {
      for (const RoutingEntry& e : l.routing) tokens[e.dst_gpu] += e.count;
    }
  }
  return tokens;
}

std::vector<int32_t> select_gpus(const StepTrace& trace, const std::vector<int32_t>& requested) {
  const int64_t num_gpus = trace.topology.num_gpus;
  if (!requested.empty()) {
    for (int32_t g : requested) {
      if (g < 0 || g >= num_gpus) {
        throw InputError("--gpus: GPU " + std::to_string(g) + " is not in the trace's topology (" +
                         std::to_string(num_gpus) + " GPUs)");
      }
    }
    return requested;
  }
  std::vector<int32_t> all(num_gpus);
  for (int32_t g = 0; g < num_gpus; ++g) all[g] = g;
  if (num_gpus <= 2) return all;
  const std::vector<int64_t> tokens = routed_tokens_per_gpu(trace);
  int32_t hottest = 0, coldest = 0;
  for (int32_t g = 1; g < num_gpus; ++g) {
    if (tokens[g] > tokens[hottest]) hottest = g;
    if (tokens[g] < tokens[coldest]) coldest = g;
  }
  if (hottest == coldest) return {hottest};
  return {hottest, coldest};
}

ReplayDtypes replay_dtypes(const TraceDtypes& trace, const std::string& expert_override) {
  ReplayDtypes d;
  d.attention = bf16_unless_fp32(trace.attention);
  d.dense_ffn = DType::kBF16;
  d.shared_experts = DType::kBF16;
  d.kv_cache = bf16_unless_fp32(trace.kv_cache);
  d.dispatch = is_8bit_or_less(trace.dispatch) ? DType::kFP8E4M3 : DType::kBF16;
  if (expert_override.empty()) {
    d.experts = is_8bit_or_less(trace.experts) ? DType::kFP8E4M3 : DType::kBF16;
  } else if (expert_override == "bf16") {
    d.experts = DType::kBF16;
  } else if (expert_override == "fp8") {
    d.experts = DType::kFP8E4M3;
  } else {
    throw InputError("--expert-dtype " + expert_override + ": valid values are bf16 and fp8");
  }
  return d;
}

ReplayDtypes resolve_dtypes(const TraceDtypes& trace, const Backend& backend,
                            const std::string& expert_override) {
  const ReplayDtypes d = replay_dtypes(trace, expert_override);
  if (!backend.supports_expert_dtype(d.experts)) {
    throw InputError("trace experts dtype '" + trace.experts + "' needs " +
                     std::string(dtype_name(d.experts)) + " expert GEMMs, which backend '" +
                     backend.name() + "' (" + backend.device_name() +
                     ") does not support; pass --expert-dtype bf16 to replay them in BF16");
  }
  return d;
}

int64_t num_local_experts(const TracePlacement& placement, int32_t gpu) {
  int64_t n = 0;
  for (const std::vector<int32_t>& gpus : placement.expert_gpus) {
    if (std::find(gpus.begin(), gpus.end(), gpu) != gpus.end()) ++n;
  }
  return n;
}

GpuExtents gpu_extents(const StepTrace& trace, int32_t gpu) {
  GpuExtents x;
  int64_t max_top_k = 0;
  for (const TraceLayer& l : trace.model.layers) max_top_k = std::max(max_top_k, l.top_k);
  for (const TraceStep& step : trace.steps) {
    int64_t tokens = 0, pre_seqs = 0, dec_seqs = 0, pre_rows = 0, dec_rows = 0;
    for (const TraceSequence& s : step.sequences) {
      if (s.gpu != gpu) continue;
      add_saturating(tokens, s.new_tokens);
      int64_t& rows = s.phase == Phase::kPrefill ? pre_rows : dec_rows;
      ++(s.phase == Phase::kPrefill ? pre_seqs : dec_seqs);
      add_saturating(rows, s.context_tokens);
      add_saturating(rows, s.new_tokens);
    }
    x.max_tokens = std::max(x.max_tokens, tokens);
    x.max_prefill_sequences = std::max(x.max_prefill_sequences, pre_seqs);
    x.max_decode_sequences = std::max(x.max_decode_sequences, dec_seqs);
    x.max_prefill_cache_rows = std::max(x.max_prefill_cache_rows, pre_rows);
    x.max_decode_cache_rows = std::max(x.max_decode_cache_rows, dec_rows);
    x.max_sent_rows = std::max(x.max_sent_rows, saturated(static_cast<Wide>(tokens) * max_top_k));
    for (const TraceMoeLayer& l : step.moe_layers) {
      int64_t received = 0;
      for (const RoutingEntry& e : l.routing) {
        if (e.dst_gpu == gpu) add_saturating(received, e.count);
      }
      x.max_received_rows = std::max(x.max_received_rows, received);
    }
  }
  return x;
}

int64_t layer_weight_bytes(const TraceLayer& l, int64_t local_experts, const ReplayDtypes& d) {
  // Products of the reader-bounded dimensions (docs/schemas/step_trace.md) fit int64; every
  // product with `hidden` is Wide.
  const Wide hidden = static_cast<Wide>(l.mla.hidden_size + l.gqa.hidden_size + l.kda.hidden_size);
  Wide b = bytes(d.activations, 2 * hidden);  // the two RMSNorm weights
  const DType a = d.attention;
  switch (l.attention_kind) {
    case AttentionKind::kMla: {
      const MlaShape& m = l.mla;
      const int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
      if (m.q_lora_rank > 0) b += bytes(a, hidden * m.q_lora_rank + m.q_lora_rank);
      b += bytes(a, (m.q_lora_rank > 0 ? m.q_lora_rank : hidden) * m.num_heads * qk);
      b += bytes(a, hidden * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank);
      b += bytes(a, m.kv_lora_rank * m.num_heads * (m.qk_nope_head_dim + m.v_head_dim));
      b += bytes(a, m.num_heads * m.v_head_dim * hidden);
      break;
    }
    case AttentionKind::kGqa: {
      const GqaShape& g = l.gqa;
      b += bytes(a, hidden * g.head_dim * (2 * g.num_heads + 2 * g.num_kv_heads));
      if (g.qk_norm) b += bytes(a, 2 * g.head_dim);
      break;
    }
    case AttentionKind::kKda: {
      const KdaShape& k = l.kda;
      const int64_t ch = k.num_heads * (2 * k.head_dim_k + k.head_dim_v);
      b += bytes(a, hidden * ch + k.short_conv_kernel * ch);
      b += bytes(a, hidden * k.gate_lora_rank + k.gate_lora_rank * k.num_heads * k.head_dim_k);
      b += bytes(a, hidden * k.num_heads);
      if (k.output_gate) {
        b += bytes(a, hidden * k.gate_lora_rank + k.gate_lora_rank * k.num_heads * k.head_dim_v);
      }
      b += bytes(DType::kF32, k.num_heads + k.num_heads * k.head_dim_k);
      b += bytes(a, k.head_dim_v + k.num_heads * k.head_dim_v * hidden);
      break;
    }
  }
  if (!l.is_moe) return saturated(b + bytes(d.dense_ffn, 3 * hidden * l.intermediate_size));
  b += bytes(d.activations, hidden * l.num_routed_experts);  // router
  b += bytes(d.experts, local_experts * 3 * hidden * l.expert_intermediate_size);
  if (d.experts == DType::kFP8E4M3) b += bytes(DType::kF32, 2 * local_experts);
  b += bytes(d.shared_experts, l.num_shared_experts * 3 * hidden * l.shared_intermediate_size);
  return saturated(b);
}

ReplayMemoryPlan plan_memory(const StepTrace& trace, const std::vector<LayerRun>& layers,
                             int32_t gpu, const ReplayDtypes& d) {
  return plan_memory(trace, layers, gpu, d, gpu_extents(trace, gpu));
}

ReplayMemoryPlan plan_memory(const StepTrace& trace, const std::vector<LayerRun>& layers,
                             int32_t gpu, const ReplayDtypes& d, const GpuExtents& x) {
  // Local experts: the most any placement of the trace puts on this GPU.
  int64_t local = 0;
  for (const TracePlacement& p : trace.placements)
    local = std::max(local, num_local_experts(p, gpu));
  const int64_t hidden = trace.model.hidden_size;
  ReplayMemoryPlan plan;
  // Weights: every selected layer, resident for the whole replay.
  for (const LayerRun& r : layers) {
    add_saturating(plan.weight_bytes,
                   layer_weight_bytes(trace.model.layers[r.layer_idx], local, d));
  }
  // Caches: one set per attention kind, shared by the layers of that kind (contents synthetic).
  int64_t mla_row = 0, gqa_row = 0;
  int64_t kda_state = 0;
  for (const LayerRun& r : layers) {
    const TraceLayer& l = trace.model.layers[r.layer_idx];
    if (l.attention_kind == AttentionKind::kMla) {
      mla_row = std::max(mla_row, l.mla.kv_lora_rank + l.mla.qk_rope_head_dim);
    } else if (l.attention_kind == AttentionKind::kGqa) {
      gqa_row = std::max(gqa_row, 2 * l.gqa.num_kv_heads * l.gqa.head_dim);
    } else {
      const KdaShape& k = l.kda;
      kda_state = std::max(kda_state, k.num_heads * k.head_dim_k * k.head_dim_v +
                                          (k.short_conv_kernel - 1) * k.num_heads *
                                              (2 * k.head_dim_k + k.head_dim_v));
    }
  }
  const Wide cache_rows = static_cast<Wide>(x.max_prefill_cache_rows) + x.max_decode_cache_rows;
  const Wide seqs = static_cast<Wide>(x.max_prefill_sequences) + x.max_decode_sequences;
  plan.cache_bytes = saturated(bytes(d.kv_cache, cache_rows * (mla_row + gqa_row)) +
                               bytes(DType::kF32, seqs * kda_state));
  // Activations: x, normed, attention out, shared-expert out (T x hidden each); router ids and
  // weights, gather and scatter indices (sent rows x 4 B each); permuted and slot buffers (sent
  // rows x hidden each); expert in and out (received rows x hidden each); all-to-all send and
  // receive buffers (dispatch dtype).
  const Wide t = static_cast<Wide>(std::max<int64_t>(x.max_tokens, 1));
  const Wide sent = static_cast<Wide>(std::max<int64_t>(x.max_sent_rows, 1));
  const Wide recv = static_cast<Wide>(std::max<int64_t>(x.max_received_rows, 1));
  plan.activation_bytes = saturated(bytes(d.activations, 4 * t * hidden) + 16 * sent +
                                    bytes(d.activations, 2 * sent * hidden + 2 * recv * hidden) +
                                    bytes(d.dispatch, (sent + recv) * hidden));
  return plan;
}

}  // namespace moesim::engine
