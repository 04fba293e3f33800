// The step observers' definitions (sim/serving/step_recorder.h): Chrome-trace slices and
// RecordObserver's per-expert split of a step's routing.
#include "sim/serving/step_recorder.h"

#include <algorithm>
#include <map>
#include <utility>

#include "sim/core/distributions.h"

namespace moesim::sim::detail {

void TraceObserver::on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                             SimTime duration_ns) {
  out_->push_back(TraceSlice{replica_idx_, gpus_[gpu_idx].value, name, layer_idx, start_ + start_ns,
                             duration_ns});
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
