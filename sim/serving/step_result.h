// What one step of one replica's step model produces (StepResult), what watches it run
// (StepObserver), and the background transfers its dispatch collectives carry.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/time.h"
#include "sim/metrics/step_totals.h"
#include "sim/routing/count_matrix.h"

namespace moesim::sim {

// Observers (metrics, traces, step records) receive what the model did; they never change it.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // A span of work or waiting on replica GPU `gpu_idx`, relative to the step start.
  virtual void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                        SimTime duration_ns) {}
  // Follows the on_slice() of a compute span that ran beside collectives holding SMs
  // (docs/serving.md, "SM sharing"): it took `lost_ns` longer than at full rate; `sm_share` is the
  // mean fraction of the GPU's SMs it had (full-rate time / span time, in (0, 1)).
  virtual void on_sm_sharing(int32_t gpu_idx, int32_t layer_idx, SimTime lost_ns, double sm_share) {
  }
  // The routing of one MoE layer: selections per (source GPU idx, destination GPU idx).
  virtual void on_routing(int32_t layer_idx, int32_t moe_layer_idx, const CountMatrix& src_dst,
                          double dispatch_bytes, double combine_bytes) {}
};

// Bytes still to send between the replica's GPUs for a background transfer (e.g. expert weights
// being replicated): remaining_bytes[src * P + dst]. Each dispatch collective carries at most
// chunk_bytes of it per pair, so the transfer competes with serving traffic on the same links.
struct BackgroundTransfer {
  int64_t id = 0;
  std::vector<double> remaining_bytes;
  double remaining_total() const;
};

// Whether any of `transfers` has bytes left to send.
bool any_remaining(const std::vector<BackgroundTransfer>& transfers);

// One step as the step model timed it: its duration, per-GPU time, and the traffic and balance
// totals (StepTotals).
struct StepResult : StepTotals {
  SimTime duration_ns = 0;
  // Per replica GPU: busy computing, in collectives, waiting at barriers.
  std::vector<SimTime> compute_ns, comm_ns, wait_ns;
  // With StepModelOptions::report_expert_loads: the load of every routed expert in every MoE
  // layer (num_moe_layers x num_experts, row-major), the routing model's expected selections per
  // token (RoutingModel::expected_shares) x the step's tokens. Empty otherwise, or when the
  // routing model states no expectation. What load-driven policies act on.
  std::vector<double> expert_loads;
  // Speculative decoding (StepModelOptions::speculative): time of the step's draft passes, from
  // the verification's end (its slowest GPU) to the step's end. 0 without drafts.
  SimTime draft_ns = 0;
  // With draft GPUs of their own: each one's busy time in the step's draft passes.
  std::vector<SimTime> draft_gpu_busy_ns;
  // With StepModelOptions::track_nic_bytes: per replica GPU, the all-to-all bytes that entered /
  // left it through its NIC (its network link) over the step's collectives. Empty otherwise.
  std::vector<double> nic_in_bytes, nic_out_bytes;
};

}  // namespace moesim::sim
