// The step observers' definitions (sim/serving/step_recorder.h): Chrome-trace slices and
// RecordObserver's per-expert split of a step's routing.
#include "sim/serving/step_recorder.h"

#include <algorithm>
#include <map>
#include <utility>

#include "base/check.h"
#include "sim/core/distributions.h"

namespace moesim::sim::detail {

void TraceObserver::on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                             SimTime duration_ns) {
  out_->push_back(TraceSlice{replica_idx_, gpus_[gpu_idx].value, name, layer_idx, start_ + start_ns,
                             duration_ns});
}

void TraceObserver::on_sm_sharing(int32_t gpu_idx, int32_t /*layer_idx*/, SimTime lost_ns,
                                  double sm_share) {
  MOESIM_CHECK(!out_->empty() && out_->back().gpu == gpus_[gpu_idx].value,
               "on_sm_sharing follows its slice");
  out_->back().sm_lost_ns = lost_ns;
  out_->back().sm_share = sm_share;
}

void RecordObserver::on_routing(int32_t layer_idx, int32_t moe_layer_idx,
                                const CountMatrix& src_dst, double dispatch_bytes,
                                double combine_bytes) {
  if (chained)
    chained->on_routing(layer_idx, moe_layer_idx, src_dst, dispatch_bytes, combine_bytes);
  StepRecord::Layer layer;
  layer.layer = layer_idx;
  layer.dispatch_bytes = dispatch_bytes;
  layer.combine_bytes = combine_bytes;
  const int32_t top_k = routing_->shape().top_k;
  const ExpertPlacement& placement = placements_->layer(moe_layer_idx);
  std::vector<double> shares;
  std::vector<int64_t> counts;
  // For one source GPU: a token picks distinct experts, so no expert may get more selections
  // from a source than the source has tokens, summed over the expert's replicas; excess moves
  // to the experts with room on the same destination GPU first, then to any expert's primary
  // GPU. Entries are (expert, destination) pairs: a replicated expert may receive on several.
  std::vector<int64_t> total(placement.num_experts());
  std::map<std::pair<int32_t, int32_t>, int64_t> by_expert_dst;
  for (int32_t s = 0; s < src_dst.num_rows(); ++s) {
    const int64_t tokens = src_dst.row_sum(s) / top_k;
    std::fill(total.begin(), total.end(), 0);
    by_expert_dst.clear();
    int64_t excess = 0;
    for (int32_t d = 0; d < src_dst.num_cols(); ++d) {
      int32_t c = src_dst.at(s, d);
      if (c == 0) continue;
      auto experts = placement.experts_on(d);
      shares.assign(experts.size(), 1.0);
      const std::span<const double> pi = routing_->expected_shares(moe_layer_idx, rec_->step);
      if (!pi.empty()) {
        for (size_t i = 0; i < experts.size(); ++i) shares[i] = pi[experts[i]] + 1e-12;
      }
      counts.assign(experts.size(), 0);
      multinomial(rng_, c, shares, counts);
      int64_t spill = 0;
      for (size_t i = 0; i < experts.size(); ++i) {
        const int64_t room = tokens - total[experts[i]];
        if (counts[i] > room) {
          spill += counts[i] - room;
          counts[i] = room;
        }
        total[experts[i]] += counts[i];
      }
      for (size_t i = 0; i < experts.size() && spill > 0; ++i) {
        const int64_t x = std::min(tokens - total[experts[i]], spill);
        counts[i] += x;
        total[experts[i]] += x;
        spill -= x;
      }
      excess += spill;
      for (size_t i = 0; i < experts.size(); ++i) {
        if (counts[i] > 0) by_expert_dst[{experts[i], d}] += counts[i];
      }
    }
    for (int32_t e = 0; e < placement.num_experts() && excess > 0; ++e) {
      const int64_t x = std::min(tokens - total[e], excess);
      if (x <= 0) continue;
      total[e] += x;
      by_expert_dst[{e, placement.primary_gpu_of_expert()[e]}] += x;
      excess -= x;
    }
    for (const auto& [ed, count] : by_expert_dst) {
      layer.routing.push_back({gpus_[s].value, ed.first, gpus_[ed.second].value, count});
    }
  }
  rec_->layers.push_back(std::move(layer));
}

}  // namespace moesim::sim::detail

namespace moesim::sim::detail {

bool traces_replica(const std::vector<int32_t>& traced, int32_t replica_idx) {
  return traced.empty() || std::find(traced.begin(), traced.end(), replica_idx) != traced.end();
}

StepRecording::StepRecording(RunRecorder& recorder, Simulation& sim, const IdWindow<Seq>& seqs,
                             const std::vector<int32_t>& traced)
    : recorder_(recorder), sim_(sim), seqs_(seqs), traced_(traced) {}

StepObserver* StepRecording::begin(const Replica& r) {
  const bool in_window = recorder_.traces_step(sim_.now()) && traces_replica(traced_, r.idx);
  record_ = recorder_.records_step();
  tracer_.reset();
  step_recorder_.reset();
  if (in_window) tracer_.emplace(recorder_.trace(), r.idx, r.gpus(), sim_.now());
  if (!record_) return in_window ? &*tracer_ : nullptr;
  rec_ = StepRecord{};
  rec_.step = r.step_idx;
  rec_.replica = r.idx;
  step_recorder_.emplace(&rec_, r.gpus(), r.placements(), r.parts.routing.get(),
                         sim_.rng("record.split"));
  step_recorder_->chained = in_window ? &*tracer_ : nullptr;
  return &*step_recorder_;
}

void StepRecording::finish(Replica& r, const ScheduledBatch& batch, const StepResult& res) {
  recorder_.on_step(StepUsage{r.gpus(), res.compute_ns, res.comm_ns, res.wait_ns, res});
  if (recorder_.keeps_step_series()) add_series_row(r, batch, res);
  if (record_) record_step(r, res.duration_ns);
}

void StepRecording::add_series_row(const Replica& r, const ScheduledBatch& batch,
                                   const StepResult& res) {
  StepSeriesRow row;
  row.replica = r.idx;
  row.step = r.step_idx;
  row.start_ns = sim_.now();
  row.duration_ns = res.duration_ns;
  row.num_seqs = static_cast<int32_t>(batch.seqs.size());
  for (const auto& [sid, sl] : batch.seqs) {
    (sl.prefill ? row.prefill_tokens : row.decode_tokens) += sl.new_tokens;
  }
  const ReplicaScheduler& sched = *r.scheduler;
  for (int32_t k = 0; k < sched.num_ranks(); ++k) {
    const KvCache& kv = sched.kv(k);
    row.kv_owned_blocks += kv.owned_blocks();
    row.kv_cached_blocks += kv.cached_blocks();
    row.kv_blocks += kv.num_blocks();
    if (kv.num_blocks() > 0) {
      row.kv_used_fraction_max = std::max(row.kv_used_fraction_max,
                                          static_cast<double>(kv.num_blocks() - kv.free_blocks()) /
                                              static_cast<double>(kv.num_blocks()));
    }
  }
  const size_t n = res.wait_ns.size();
  for (size_t g = 0; g < n; ++g) {
    row.compute_ns_mean += static_cast<double>(res.compute_ns[g]);
    row.comm_ns_mean += static_cast<double>(res.comm_ns[g]);
    row.wait_ns_mean += static_cast<double>(res.wait_ns[g]);
    row.wait_ns_max = std::max(row.wait_ns_max, res.wait_ns[g]);
  }
  if (n > 0) {
    row.compute_ns_mean /= static_cast<double>(n);
    row.comm_ns_mean /= static_cast<double>(n);
    row.wait_ns_mean /= static_cast<double>(n);
  }
  recorder_.add_series_row(row);
}

void StepRecording::record_step(Replica& r, SimTime duration_ns) {
  rec_.start_ns = sim_.now();
  rec_.end_ns = sim_.now() + duration_ns;
  for (const auto& [sid, sl] : r.scheduler->batch().seqs) {
    rec_.seqs.push_back(StepRecord::Seq{seqs_[sid].req.id.value,
                                        r.gpus()[seqs_[sid].rank * r.tp()].value, sl.prefill,
                                        sl.new_tokens, sl.context_tokens});
  }
  std::vector<ExpertGpus> layers;
  if (r.placements() && r.placement_version != r.recorded_placement_version) {
    for (int32_t l = 0; l < r.placements()->num_layers(); ++l) layers.push_back(r.expert_gpus(l));
    r.recorded_placement_version = r.placement_version;
  }
  recorder_.add_step(std::move(rec_), layers.empty() ? nullptr : &layers);
}

}  // namespace moesim::sim::detail
