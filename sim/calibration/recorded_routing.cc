#include "sim/calibration/recorded_routing.h"

#include <algorithm>

#include "base/check.h"
#include "base/checked_number.h"
#include "sim/config/config_error.h"

namespace moesim::sim {

RecordedRoutingModel::RecordedRoutingModel(const StepTraceFile& trace, int32_t replica,
                                           const RoutingShape& shape,
                                           const std::vector<int32_t>& moe_layer_of_layer)
    : file_(trace.file), shape_(shape) {
  const std::vector<int32_t>& gpus = trace.replica_gpus.at(static_cast<size_t>(replica));
  num_gpus_ = static_cast<int32_t>(gpus.size());
  auto local = [&](int64_t global, const TraceStep& s) {
    auto it = std::find(gpus.begin(), gpus.end(), static_cast<int32_t>(global));
    if (it == gpus.end()) {
      throw ConfigError(
          trace.file, 0, 0, "step " + std::to_string(s.step) + ".layers.routing",
          "GPU " + std::to_string(global) + " is not in replica " + std::to_string(replica));
    }
    return static_cast<int32_t>(it - gpus.begin());
  };
  for (const TraceStep& s : trace.steps) {
    if (s.replica != replica) continue;
    for (const TraceLayer& l : s.layers) {
      if (l.layer_idx < 0 || l.layer_idx >= static_cast<int32_t>(moe_layer_of_layer.size()) ||
          moe_layer_of_layer[l.layer_idx] < 0) {
        throw ConfigError(trace.file, 0, 0, "step " + std::to_string(s.step) + ".layers.layer",
                          "layer " + std::to_string(l.layer_idx) + " is not an MoE layer");
      }
      const auto [slot, fresh] = steps_.try_emplace({s.step, moe_layer_of_layer[l.layer_idx]});
      if (!fresh) {
        throw ConfigError(trace.file, 0, 0, "step " + std::to_string(s.step) + ".layers.layer",
                          "layer " + std::to_string(l.layer_idx) + " listed twice");
      }
      Recorded& r = slot->second;
      r.src_expert.reset(num_gpus_, shape_.num_experts);
      r.src_dst.reset(num_gpus_, num_gpus_);
      for (const auto& [src, expert, dst, count] : l.routing) {
        if (expert < 0 || expert >= shape_.num_experts) {
          throw ConfigError(trace.file, 0, 0, "step " + std::to_string(s.step) + ".layers.routing",
                            "expert " + std::to_string(expert) + " out of range");
        }
        int32_t sl = local(src, s), dl = local(dst, s);
        // Counts are int32 (the reader checks each); their sums must stay so.
        int32_t& se = r.src_expert.at(sl, static_cast<int32_t>(expert));
        int32_t& sd = r.src_dst.at(sl, dl);
        if (!checked_narrow<int32_t>(int64_t{se} + count) ||
            !checked_narrow<int32_t>(int64_t{sd} + count)) {
          throw ConfigError(trace.file, 0, 0, "step " + std::to_string(s.step) + ".layers.routing",
                            "counts sum past " + std::to_string(INT32_MAX));
        }
        se += static_cast<int32_t>(count);
        sd += static_cast<int32_t>(count);
      }
    }
  }
}

const RecordedRoutingModel::Recorded& RecordedRoutingModel::find(const RoutingQuery& q) const {
  const std::string step = "step " + std::to_string(q.step_idx);
  const std::string layer = "MoE layer " + std::to_string(q.moe_layer_idx);
  auto it = steps_.find({q.step_idx, q.moe_layer_idx});
  if (it == steps_.end()) {
    throw ConfigError(file_, 0, 0, step + ".layers",
                      "no routing recorded for " + layer + " in a step that has tokens");
  }
  MOESIM_CHECK(static_cast<int32_t>(q.tokens_per_src.size()) == num_gpus_,
               "recorded routing: source count differs from the replica's GPUs");
  for (int32_t s = 0; s < num_gpus_; ++s) {
    const int64_t recorded = it->second.src_dst.row_sum(s);
    const int64_t expected = static_cast<int64_t>(q.tokens_per_src[s]) * shape_.top_k;
    if (recorded != expected) {
      throw ConfigError(file_, 0, 0, step + ".layers.routing",
                        layer + ": replica GPU " + std::to_string(s) + " has " +
                            std::to_string(recorded) + " selections, its " +
                            std::to_string(q.tokens_per_src[s]) + " tokens x top_k " +
                            std::to_string(shape_.top_k) + " make " + std::to_string(expected));
    }
  }
  return it->second;
}

void RecordedRoutingModel::route(const RoutingQuery& query, CountMatrix& out) {
  out = find(query).src_expert;
}

void RecordedRoutingModel::route_to_gpus(const RoutingQuery& query,
                                         std::span<const int32_t> gpu_of_expert,
                                         int32_t num_dst_gpus, CountMatrix& out) {
  MOESIM_CHECK(num_dst_gpus == num_gpus_, "recorded routing: destination count mismatch");
  out = find(query).src_dst;
}

}  // namespace moesim::sim
