// The op execution behind replay and serve: engine/gpu_executor.h.
#include "engine/gpu_executor.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/check.h"
#include "engine/gpu_buffers.h"
#include "engine/layer_weights.h"
#include "engine/permutation.h"
#include "engine/synthetic.h"
#include "engine/timing.h"

namespace moesim::engine {

// One simulated GPU's weights, buffers and the execution of its share of a step.
class Executor {
 public:
  Executor(Backend& backend, const StepTrace& trace, const std::vector<LayerRun>& layers,
           const ReplayDtypes& dtypes, int32_t gpu, const GpuExtents& extents,
           const ExecutorOptions& options, MeasurementWriter* writer)
      : backend_(backend),
        trace_(trace),
        options_(options),
        layers_(layers),
        dtypes_(dtypes),
        gpu_(gpu),
        writer_(writer) {
    int64_t local = 0;
    for (const TracePlacement& p : trace_.placements) {
      local = std::max(local, num_local_experts(p, gpu_));
    }
    for (const LayerRun& r : layers_) {
      weights_.push_back(build_layer_weights(backend_, trace_.model.layers[r.layer_idx], local,
                                             dtypes_, options_.seed));
    }
    buffers_ = allocate_buffers(backend_, trace_, extents, state_sizes(trace_, layers_), dtypes_,
                                options_.seed);
    lm_head_ = build_lm_head(backend_, trace_, gpu_, extents.max_tokens, dtypes_.activations,
                             options_.seed);
    if (options_.timed && options_.interleave) {
      timer_ = backend_.make_timer();
      collective_timer_ = backend_.make_collective_timer();
      waits_ = thread_wait_source(backend_.worker_thread_ids());
    }
  }

  int64_t num_op_records() const { return num_op_records_; }
  int64_t num_step_records() const { return num_step_records_; }

  void run_step(const TraceStep& step) {
    step_ = &step;
    step_record_ = StepRecord{step.step_idx, step.replica_idx, gpu_, 0, 0, 0, 0, step.sim_step_ns};
    prefill_ = AttentionBatch{};
    decode_ = AttentionBatch{};
    for (const TraceSequence& s : step.sequences) {
      if (s.gpu != gpu_) continue;
      AttentionBatch& b = s.phase == Phase::kPrefill ? prefill_ : decode_;
      b.new_tokens.push_back(s.new_tokens);
      b.context_tokens.push_back(s.context_tokens);
    }
    all_ = prefill_;
    all_.new_tokens.insert(all_.new_tokens.end(), decode_.new_tokens.begin(),
                           decode_.new_tokens.end());
    all_.context_tokens.insert(all_.context_tokens.end(), decode_.context_tokens.begin(),
                               decode_.context_tokens.end());
    tokens_ = all_.total_new_tokens();
    if (options_.timed && options_.interleave) {
      play_interleaved();
    } else {
      play();
    }
    if (writer_ != nullptr) writer_->write_step(step_record_);
    ++num_step_records_;
  }

 private:
  // Whether ops run once each (untimed, or timed one by one), as warm-up rounds, or as timed
  // rounds of an interleaved schedule.
  enum class Pass { kOnce, kWarmup, kTimed };

  void play() {
    for (size_t i = 0; i < layers_.size(); ++i) run_layer(layers_[i], weights_[i]);
    run_lm_head();
  }

  // The interleaved schedule: `warmup` untimed rounds of the whole step, then timed rounds, each
  // op one run per round, so that an op runs between the ops it runs between in a step, with
  // the caches they leave, rather than right after its own previous run. A single rank adds
  // rounds until every op has its clean runs or the extra runs are spent; several ranks run
  // exactly `repeats` rounds (every rank must enter each collective equally often).
  void play_interleaved() {
    pass_ = Pass::kWarmup;
    for (int w = 0; w < options_.warmup; ++w) play();
    backend_.synchronize();
    pass_ = Pass::kTimed;
    round_records_.clear();
    round_sets_.clear();
    round_written_.clear();
    round_sampled_.clear();
    const bool fixed = backend_.world_size() > 1;
    const int extra =
        options_.timing.max_extra_runs < 0 ? options_.repeats : options_.timing.max_extra_runs;
    const int max_rounds = options_.repeats + (fixed ? 0 : extra);
    int rounds = 0;
    auto all_done = [&] {
      for (const SampleSet& set : round_sets_) {
        if (!set.done()) return false;
      }
      return true;
    };
    do {
      pos_ = 0;
      play();
      ++rounds;
    } while (rounds < options_.repeats || (rounds < max_rounds && !all_done()));
    pass_ = Pass::kOnce;
    for (size_t i = 0; i < round_records_.size(); ++i) {
      OpRecord& r = round_records_[i];
      if (round_sampled_[i]) record_timing(round_sets_[i].stats(), r);
      if (!round_written_[i]) continue;
      write(r);
      if (r.op == OpKind::kExpertFfn && writer_ != nullptr) writer_->write_op(r);
    }
  }

  // The record and samples of the op at the current position of a timed round (created in the
  // first round).
  size_t round_slot(const OpRecord& fresh, const TimingPolicy& policy, bool written) {
    if (pos_ == round_records_.size()) {
      round_records_.push_back(fresh);
      round_sets_.emplace_back(options_.repeats, policy);
      round_written_.push_back(written);
      round_sampled_.push_back(false);
    }
    return pos_++;
  }

  const TraceReplica& step_replica(const TraceStep& step) const {
    const TraceReplica* replica = nullptr;
    for (const TraceReplica& r : trace_.replicas) {
      if (r.replica_idx == step.replica_idx) replica = &r;
    }
    MOESIM_CHECK(replica != nullptr, "step replica validated by the reader");
    return *replica;
  }

  // Whether any two GPUs exchange tokens in `routing` (multi-rank: then every rank enters the
  // layer's all-to-alls, its own share possibly empty).
  static bool has_remote_traffic(const TraceMoeLayer* routing) {
    if (routing == nullptr) return false;
    for (const RoutingEntry& e : routing->routing) {
      if (e.src_gpu != e.dst_gpu) return true;
    }
    return false;
  }

  void run_layer(const LayerRun& run, const LayerWeights& w) {
    const TraceLayer& l = trace_.model.layers[run.layer_idx];
    const int64_t hidden = trace_.model.hidden_size;
    const DType act = dtypes_.activations;
    run_ = &run;
    const Tensor x = rows_view(buffers_.x, 0, tokens_, hidden);
    const Tensor normed = rows_view(buffers_.normed, 0, tokens_, hidden);
    const Tensor attn_out = rows_view(buffers_.attn_out, 0, tokens_, hidden);
    if (tokens_ > 0) {
      time(OpKind::kRmsnorm, tokens_, all_, rmsnorm_cost(2 * tokens_, hidden, 2, act), act,
           trace_.model.dtypes.attention, [&] {
             backend_.rmsnorm(x, w.attn_norm, 1e-6f, normed);
             backend_.rmsnorm(x, w.ffn_norm, 1e-6f, normed);
           });
    }
    run_attention(l, w, prefill_, true, 0);
    run_attention(l, w, decode_, false, prefill_.total_new_tokens());
    if (!l.is_moe) {
      if (tokens_ > 0) {
        time(OpKind::kDenseFfn, tokens_, all_,
             ffn_cost({tokens_}, hidden, l.intermediate_size, dtypes_.dense_ffn, act),
             dtypes_.dense_ffn, trace_.model.dtypes.dense_ffn,
             [&] { backend_.expert_ffn(normed, {tokens_}, w.dense, attn_out); });
      }
      return;
    }
    run_moe(l, w, normed);
  }

  // The output head after the last layer, as the simulator prices it: one row per prefill
  // sequence and one per new token of a decode sequence (a speculative verification of 1 + d
  // tokens needs the logits of each); the input rows stand for the final hidden states.
  void run_lm_head() {
    const int64_t rows = prefill_.num_sequences() + decode_.total_new_tokens();
    if (lm_head_.tiles.empty() || rows == 0) return;
    const int64_t hidden = trace_.model.hidden_size;
    const DType act = dtypes_.activations;
    run_ = &kLmHeadRun;
    const Tensor in = rows_view(buffers_.normed, 0, rows, hidden);
    const Tensor ids = rows_view(lm_head_.ids, 0, rows, 1);
    const Tensor probs = rows_view(lm_head_.probs, 0, rows, 1);
    time(OpKind::kLmHead, rows, all_, lm_head_cost(rows, hidden, lm_head_.vocab, act, act), act,
         std::string(dtype_name(act)), [&] {
           for (size_t i = 0; i < lm_head_.tiles.size(); ++i) {
             backend_.router(in, lm_head_.tiles[i], lm_head_.configs[i], ids, probs);
           }
         });
  }

  void run_attention(const TraceLayer& l, const LayerWeights& w, const AttentionBatch& batch,
                     bool prefill, int64_t row0) {
    if (batch.num_sequences() == 0) return;
    const int64_t hidden = trace_.model.hidden_size;
    const int64_t n = batch.total_new_tokens();
    const int64_t rows = batch.total_cache_rows();
    const Tensor in = rows_view(buffers_.normed, row0, n, hidden);
    const Tensor out = rows_view(buffers_.attn_out, row0, n, hidden);
    const DType a = dtypes_.attention;
    const DType act = dtypes_.activations;
    const std::string& trace_dtype = trace_.model.dtypes.attention;
    switch (l.attention_kind) {
      case AttentionKind::kMla: {
        const MlaForm form = prefill ? MlaForm::kNaive : MlaForm::kAbsorbed;
        const Tensor cache =
            reshaped(prefill ? buffers_.mla_prefill_cache : buffers_.mla_decode_cache,
                     {rows, l.mla.kv_lora_rank + l.mla.qk_rope_head_dim});
        time(prefill ? OpKind::kAttnMlaPrefill : OpKind::kAttnMlaDecode, n, batch,
             mla_cost(l.mla, batch, form, a, dtypes_.kv_cache, act), a, trace_dtype,
             [&] { backend_.mla_attention(w.mla, batch, form, in, cache, out); });
        break;
      }
      case AttentionKind::kGqa: {
        const Tensor& buf = prefill ? buffers_.gqa_prefill_cache : buffers_.gqa_decode_cache;
        const int64_t width = l.gqa.num_kv_heads * l.gqa.head_dim;
        const Tensor k_cache = reshaped(buf, {rows, width});
        const Tensor v_cache{
            static_cast<char*>(buf.data) + k_cache.size_bytes(), buf.dtype, {rows, width}};
        MOESIM_CHECK(2 * k_cache.size_bytes() <= buf.size_bytes(), "KV cache too small");
        time(prefill ? OpKind::kAttnGqaPrefill : OpKind::kAttnGqaDecode, n, batch,
             gqa_cost(l.gqa, batch, a, dtypes_.kv_cache, act), a, trace_dtype,
             [&] { backend_.gqa_attention(w.gqa, batch, in, k_cache, v_cache, out); });
        break;
      }
      case AttentionKind::kKda: {
        const KdaShape& k = l.kda;
        const int64_t seqs = batch.num_sequences();
        const Tensor& buf = prefill ? buffers_.kda_prefill_state : buffers_.kda_decode_state;
        const Tensor recurrent = reshaped(buf, {seqs, k.num_heads, k.head_dim_k, k.head_dim_v});
        const Tensor conv{
            static_cast<char*>(buf.data) + recurrent.size_bytes(),
            DType::kF32,
            {seqs, k.short_conv_kernel - 1, k.num_heads * (2 * k.head_dim_k + k.head_dim_v)}};
        MOESIM_CHECK(recurrent.size_bytes() + conv.size_bytes() <= buf.size_bytes(),
                     "KDA state too small");
        const KdaState state{recurrent, conv};
        time(prefill ? OpKind::kAttnKdaPrefill : OpKind::kAttnKdaDecode, n, batch,
             kda_cost(k, batch, a, act), a, trace_dtype,
             [&] { backend_.kda_attention(w.kda, batch, in, state, out); });
        break;
      }
    }
  }

  void run_moe(const TraceLayer& l, const LayerWeights& w, const Tensor& normed) {
    const int64_t hidden = trace_.model.hidden_size;
    const int64_t k = l.top_k;
    const DType act = dtypes_.activations;
    const TraceDtypes& td = trace_.model.dtypes;
    const TraceMoeLayer* routing = step_->moe_layer(l.layer_idx);
    const TracePlacement& placement =
        trace_.placement_at(step_->replica_idx, step_->step_idx, l.layer_idx);
    const int64_t sent = tokens_ * k;

    // Forced routing of this GPU's tokens, and its send / receive row counts per GPU.
    std::vector<ExpertSelectionCount> counts;
    std::map<int32_t, int64_t> send_rows, recv_rows;
    std::map<int32_t, int64_t> recv_per_expert;
    if (routing != nullptr) {
      for (const RoutingEntry& e : routing->routing) {
        if (e.src_gpu == gpu_) {
          counts.push_back({e.expert, e.dst_gpu, e.count});
          send_rows[e.dst_gpu] += e.count;
        }
        if (e.dst_gpu == gpu_) {
          recv_rows[e.src_gpu] += e.count;
          recv_per_expert[e.expert] += e.count;
        }
      }
    }
    Permutation perm;
    DeviceTensor gather, scatter;
    if (tokens_ > 0) {
      const ForcedRouting forced = assign_forced_routing(tokens_, k, counts);
      perm = make_permutation(forced.expert_ids, k, l.num_routed_experts);
      gather = upload_ints(backend_, perm.gather_rows, {sent}, "gather rows");
      scatter = upload_ints(backend_, perm.scatter_rows, {sent}, "scatter rows");
      const Tensor ids = reshaped(buffers_.router_ids, {tokens_, k});
      const Tensor weights = reshaped(buffers_.router_weights, {tokens_, k});
      const RouterConfig config{l.num_routed_experts, k, l.scoring, true, 1.0f};
      time(OpKind::kRouter, tokens_, all_,
           router_cost(tokens_, hidden, l.num_routed_experts, k, act, act), act, td.shared_experts,
           [&] { backend_.router(normed, w.router, config, ids, weights); });
      const Tensor permuted = rows_view(buffers_.permuted, 0, sent, hidden);
      time(OpKind::kPermute, sent, all_, permute_cost(sent, hidden, act), act, td.attention,
           [&] { backend_.permute(normed, gather.view, permuted); });
    }

    // Dispatch all-to-all (real only with every rank present).
    all_to_all(OpKind::kDispatchA2a, send_rows, recv_rows, td.dispatch);

    // Local experts: those with a replica here, in expert order.
    std::vector<int32_t> local;
    for (int32_t e = 0; e < static_cast<int32_t>(placement.expert_gpus.size()); ++e) {
      const auto& gpus = placement.expert_gpus[e];
      if (std::find(gpus.begin(), gpus.end(), gpu_) != gpus.end()) local.push_back(e);
    }
    std::vector<int64_t> tokens_per_expert;
    int64_t received = 0;
    for (int32_t e : local) {
      tokens_per_expert.push_back(recv_per_expert.count(e) ? recv_per_expert[e] : 0);
      received += tokens_per_expert.back();
    }
    if (received > 0) {
      const FfnWeights experts = first_experts(w.experts, static_cast<int64_t>(local.size()));
      const Tensor in = rows_view(buffers_.expert_in, 0, received, hidden);
      const Tensor out = rows_view(buffers_.expert_out, 0, received, hidden);
      OpRecord& r = time(
          OpKind::kExpertFfn, received, all_,
          ffn_cost(tokens_per_expert, hidden, l.expert_intermediate_size, dtypes_.experts, act),
          dtypes_.experts, td.experts,
          [&] { backend_.expert_ffn(in, tokens_per_expert, experts, out); });
      r.experts = local;
      r.tokens_per_expert = tokens_per_expert;
      if (pass_ == Pass::kOnce && writer_ != nullptr) writer_->write_op(r);
    }

    const Tensor shared_out = rows_view(buffers_.shared_out, 0, tokens_, hidden);
    if (tokens_ > 0 && l.num_shared_experts > 0) {
      time(OpKind::kSharedExpert, tokens_, all_,
           ffn_cost({tokens_}, hidden, l.num_shared_experts * l.shared_intermediate_size,
                    dtypes_.shared_experts, act),
           dtypes_.shared_experts, td.shared_experts,
           [&] { backend_.expert_ffn(normed, {tokens_}, w.shared, shared_out); });
    }

    // Combine all-to-all: the reverse traffic.
    all_to_all(OpKind::kCombineA2a, recv_rows, send_rows, td.combine);

    if (tokens_ > 0) {
      // The expert outputs of this GPU's tokens return in permuted order; the permuted buffer
      // stands in for them when other ranks are absent.
      const Tensor permuted = rows_view(buffers_.permuted, 0, sent, hidden);
      const Tensor slots = rows_view(buffers_.slots, 0, sent, hidden);
      time(OpKind::kUnpermute, sent, all_, permute_cost(sent, hidden, act), act, td.combine,
           [&] { backend_.unpermute(permuted, scatter.view, slots); });
      const Tensor slots3 = reshaped(buffers_.slots, {tokens_, k, hidden});
      const Tensor weights = reshaped(buffers_.router_weights, {tokens_, k});
      const Tensor out = rows_view(buffers_.attn_out, 0, tokens_, hidden);
      const Tensor shared = l.num_shared_experts > 0 ? shared_out : Tensor{};
      time(OpKind::kCombine, tokens_, all_,
           combine_cost(tokens_, k, hidden, l.num_shared_experts > 0, act), act, td.combine,
           [&] { backend_.weighted_combine(slots3, weights, shared, out); });
    }
  }

  void all_to_all(OpKind kind, const std::map<int32_t, int64_t>& send,
                  const std::map<int32_t, int64_t>& recv, const std::string& trace_dtype) {
    const int64_t hidden = trace_.model.hidden_size;
    const TraceReplica* replica = &step_replica(*step_);
    std::vector<int64_t> send_rows, recv_rows;
    int64_t send_total = 0, recv_total = 0, remote_send = 0, remote_recv = 0;
    for (int32_t g : replica->gpus) {
      const int64_t s = send.count(g) ? send.at(g) : 0;
      const int64_t r = recv.count(g) ? recv.at(g) : 0;
      send_rows.push_back(s);
      recv_rows.push_back(r);
      send_total += s;
      recv_total += r;
      if (g != gpu_) {
        remote_send += s;
        remote_recv += r;
      }
    }
    const bool own_traffic = remote_send > 0 || remote_recv > 0;
    const bool multi_rank = backend_.world_size() > 1;
    if (multi_rank ? !has_remote_traffic(step_->moe_layer(run_->layer_idx)) : !own_traffic) return;
    const double row_bytes = static_cast<double>(hidden * dtype_size_bytes(dtypes_.dispatch));
    const OpCost cost = all_to_all_cost(remote_send * row_bytes, remote_recv * row_bytes);
    const Tensor send_buf = kind == OpKind::kDispatchA2a
                                ? rows_view(buffers_.a2a_send, 0, send_total, hidden)
                                : rows_view(buffers_.a2a_recv, 0, send_total, hidden);
    const Tensor recv_buf = kind == OpKind::kDispatchA2a
                                ? rows_view(buffers_.a2a_recv, 0, recv_total, hidden)
                                : rows_view(buffers_.a2a_send, 0, recv_total, hidden);
    auto exchange = [&] { backend_.all_to_all(send_buf, send_rows, recv_buf, recv_rows); };
    if (pass_ == Pass::kWarmup) {
      if (multi_rank) exchange();
      return;
    }
    if (pass_ == Pass::kTimed) {
      const size_t i =
          round_slot(base_record(kind, remote_send, all_, cost, dtypes_.dispatch, trace_dtype),
                     collective_policy(options_.timing), own_traffic);
      if (multi_rank) {
        time_one_sample(*collective_timer_, waits_.get(), exchange, round_sets_[i]);
        round_sampled_[i] = true;
      }
      return;
    }
    const bool available =
        multi_rank && backend_.all_to_all(send_buf, send_rows, recv_buf, recv_rows);
    OpRecord r = base_record(kind, remote_send, all_, cost, dtypes_.dispatch, trace_dtype);
    if (available && options_.timed) {
      const TimingStats t =
          time_collective(backend_, options_.warmup, options_.repeats, exchange, options_.timing);
      set_timing(r, t);
    }
    if (own_traffic) write(r);
  }

  OpRecord base_record(OpKind op, int64_t tokens, const AttentionBatch& batch, const OpCost& cost,
                       DType dtype, const std::string& trace_dtype) const {
    OpRecord r;
    r.step_idx = step_->step_idx;
    r.replica_idx = step_->replica_idx;
    r.sim_gpu = gpu_;
    r.layer_idx = run_->layer_idx;
    r.layer_scale = run_->scale;
    r.op = op;
    r.tokens = tokens;
    const ContextStats c = context_stats(batch);
    r.context_tokens_sum = c.sum;
    r.context_tokens_max = c.max;
    r.num_sequences = batch.num_sequences();
    r.cost = cost;
    r.dtype = std::string(dtype_name(dtype));
    r.trace_dtype = trace_dtype;
    return r;
  }

  void set_timing(OpRecord& r, const TimingStats& t) { record_timing(t, r); }

  void write(const OpRecord& r) {
    ++step_record_.num_ops;
    if (r.measured) {
      step_record_.measured_ns_sum += r.measured_ns;
      step_record_.scaled_ns_sum += r.measured_ns * r.layer_scale;
    } else {
      ++step_record_.num_not_measured;
    }
    ++num_op_records_;
    if (r.op != OpKind::kExpertFfn && writer_ != nullptr) writer_->write_op(r);
  }

  // Times `op` and records it (in a timed round: takes one sample of it). expert_ffn records are
  // completed by the caller, and written by it outside interleaved rounds.
  template <typename Fn>
  OpRecord& time(OpKind kind, int64_t tokens, const AttentionBatch& batch, const OpCost& cost,
                 DType dtype, const std::string& trace_dtype, Fn&& op) {
    if (pass_ == Pass::kWarmup) {
      op();
      return last_;
    }
    if (pass_ == Pass::kTimed) {
      const size_t i = round_slot(base_record(kind, tokens, batch, cost, dtype, trace_dtype),
                                  options_.timing, true);
      time_one_sample(*timer_, waits_.get(), op, round_sets_[i]);
      round_sampled_[i] = true;
      return round_records_[i];
    }
    last_ = base_record(kind, tokens, batch, cost, dtype, trace_dtype);
    if (options_.timed) {
      set_timing(last_, time_op(backend_, options_.warmup, options_.repeats, op, options_.timing));
    } else {
      op();
    }
    write(last_);
    return last_;
  }

  Backend& backend_;
  const StepTrace& trace_;
  const ExecutorOptions options_;
  const std::vector<LayerRun> layers_;
  const ReplayDtypes dtypes_;
  int32_t gpu_;
  MeasurementWriter* writer_;
  int64_t num_op_records_ = 0;
  int64_t num_step_records_ = 0;

  std::vector<LayerWeights> weights_;
  GpuBuffers buffers_;
  LmHead lm_head_;
  const TraceStep* step_ = nullptr;
  const LayerRun* run_ = nullptr;
  AttentionBatch prefill_, decode_, all_;
  int64_t tokens_ = 0;
  StepRecord step_record_;
  OpRecord last_;
  Pass pass_ = Pass::kOnce;
  size_t pos_ = 0;  // the op's position in the step, in a timed round
  std::vector<OpRecord> round_records_;
  std::vector<SampleSet> round_sets_;
  std::vector<bool> round_written_;  // false: an all-to-all this GPU only takes part in
  std::vector<bool> round_sampled_;
  std::unique_ptr<Timer> timer_;
  std::unique_ptr<Timer> collective_timer_;  // wall clock on the CPU (engine/backend.h)
  std::unique_ptr<WaitSource> waits_;
};

int64_t lm_head_vocab(const StepTrace& trace, int32_t gpu) {
  int64_t tp = 1;
  for (const TraceReplica& r : trace.replicas) {
    if (std::find(r.gpus.begin(), r.gpus.end(), gpu) != r.gpus.end() && r.attention == "tp") {
      tp = std::max<int64_t>(1, r.attention_tp);
    }
  }
  return trace.model.vocab_size / tp;
}

GpuExecutor::GpuExecutor(Backend& backend, const StepTrace& deployment,
                         const std::vector<LayerRun>& layers, const ReplayDtypes& dtypes,
                         int32_t gpu, const GpuExtents& extents, const ExecutorOptions& options,
                         MeasurementWriter* writer)
    : impl_(std::make_unique<Executor>(backend, deployment, layers, dtypes, gpu, extents, options,
                                       writer)) {}

GpuExecutor::~GpuExecutor() = default;

void GpuExecutor::run_step(const TraceStep& step) { impl_->run_step(step); }

int64_t GpuExecutor::num_op_records() const { return impl_->num_op_records(); }

int64_t GpuExecutor::num_step_records() const { return impl_->num_step_records(); }

}  // namespace moesim::engine
