#include "sim/metrics/run_recorder.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace moesim::sim {

void RunRecorder::on_step(const StepUsage& u) {
  const StepTotals& t = u.totals;
  counters_.num_steps++;
  counters_.dispatch_bytes += t.dispatch_bytes;
  counters_.combine_bytes += t.combine_bytes;
  counters_.max_gpu_selections_sum += t.max_gpu_selections;
  counters_.mean_gpu_selections_sum += t.mean_gpu_selections;
  counters_.gpu_imbalance_sum += t.gpu_imbalance_sum;
  counters_.gpu_balancedness_sum += t.gpu_balancedness_sum;
  counters_.num_gpu_balance_samples += t.num_gpu_balance_layers;
  counters_.slot_imbalance_sum += t.slot_imbalance_sum;
  counters_.slot_balancedness_sum += t.slot_balancedness_sum;
  counters_.num_slot_balance_samples += t.num_slot_balance_layers;
  counters_.fast_fidelity_layers += t.num_fast_layers;
  counters_.exact_fidelity_layers += t.num_exact_layers;
  for (size_t g = 0; g < u.gpus.size(); ++g) {
    GpuRecord& gr = gpus_[u.gpus[g].value];
    gr.compute_ns += u.compute_ns[g];
    gr.comm_ns += u.comm_ns[g];
    gr.wait_ns += u.wait_ns[g];
  }
  flush_trace();
}

void RunRecorder::on_action(const std::string& name, int64_t n, SimTime now) {
  counters_.actions[name] += n;
  if (!opt_.chrome_trace || num_instants_ >= static_cast<int64_t>(kMaxInstants)) return;
  ++num_instants_;
  trace_.push_back(TraceSlice{0, -1, "policy:" + name, -1, now, 0});
  flush_trace();
}

void RunRecorder::flush_trace() {
  if (opt_.trace_sink == nullptr || trace_.empty()) return;
  opt_.trace_sink->add(trace_);
  trace_.clear();
}

void RunRecorder::set_initial_placement(int32_t replica_idx, const ExpertGpus& layer0,
                                        int32_t num_moe_layers) {
  MOESIM_CHECK(static_cast<size_t>(replica_idx) == recorded_placement_.size(),
               "initial placements in replica order");
  initial_.resize(layer0.size());
  for (size_t e = 0; e < layer0.size(); ++e) {
    initial_[e].insert(initial_[e].end(), layer0[e].begin(), layer0[e].end());
  }
  // Only recorded steps compare placements: without them one copy is enough.
  const int32_t copies = opt_.record_steps ? num_moe_layers : 0;
  recorded_placement_.emplace_back(static_cast<size_t>(copies), layer0);
}

void RunRecorder::add_step(StepRecord record, const std::vector<ExpertGpus>* layers) {
  if (layers != nullptr && static_cast<size_t>(record.replica) < recorded_placement_.size()) {
    std::vector<ExpertGpus>& recorded = recorded_placement_[record.replica];
    MOESIM_CHECK(recorded.size() == layers->size(), "one placement per MoE layer");
    std::vector<int32_t> changed;
    for (size_t l = 0; l < layers->size(); ++l) {
      if ((*layers)[l] != recorded[l]) changed.push_back(static_cast<int32_t>(l));
    }
    const bool all_same = !changed.empty() && changed.size() == layers->size() &&
                          std::all_of(layers->begin(), layers->end(),
                                      [&](const ExpertGpus& p) { return p == layers->front(); });
    if (all_same) {
      changes_.push_back({record.replica, record.step, -1, layers->front()});
    } else {
      for (int32_t l : changed) changes_.push_back({record.replica, record.step, l, (*layers)[l]});
    }
    for (int32_t l : changed) recorded[l] = (*layers)[l];
  }
  steps_.push_back(std::move(record));
}

}  // namespace moesim::sim
