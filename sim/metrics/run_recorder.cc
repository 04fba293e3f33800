#include "sim/metrics/run_recorder.h"

#include <utility>

#include "sim/core/check.h"

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
  for (size_t g = 0; g < u.gpus.size(); ++g) {
    GpuRecord& gr = gpus_[u.gpus[g].value];
    gr.compute_ns += u.compute_ns[g];
    gr.comm_ns += u.comm_ns[g];
    gr.wait_ns += u.wait_ns[g];
  }
}

void RunRecorder::on_action(const std::string& name, int64_t n, SimTime now) {
  counters_.actions[name] += n;
  if (trace_.size() < kMaxInstants)
    trace_.push_back(TraceSlice{0, -1, "policy:" + name, -1, now, 0});
}

void RunRecorder::set_initial_placement(int32_t replica_idx,
                                        std::vector<std::vector<int32_t>> expert_gpus) {
  MOESIM_CHECK(static_cast<size_t>(replica_idx) == recorded_placement_.size(),
               "initial placements in replica order");
  initial_.resize(expert_gpus.size());
  for (size_t e = 0; e < expert_gpus.size(); ++e) {
    initial_[e].insert(initial_[e].end(), expert_gpus[e].begin(), expert_gpus[e].end());
  }
  recorded_placement_.push_back(std::move(expert_gpus));
}

void RunRecorder::add_step(StepRecord record, std::vector<std::vector<int32_t>> expert_gpus) {
  if (static_cast<size_t>(record.replica) < recorded_placement_.size() &&
      expert_gpus != recorded_placement_[record.replica]) {
    changes_.push_back({record.replica, record.step, expert_gpus});
    recorded_placement_[record.replica] = std::move(expert_gpus);
  }
  steps_.push_back(std::move(record));
}

}  // namespace moesim::sim
