// Step observers used while recording (internal to sim/serving): TraceObserver appends a step's
// GPU slices to the Chrome trace; RecordObserver fills a StepRecord's per-expert routing for the
// step trace (docs/schemas/step_trace.md).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/rng.h"
#include "sim/core/time.h"
#include "sim/placement/expert_placement.h"
#include "sim/routing/count_matrix.h"
#include "sim/serving/cluster.h"
#include "sim/serving/step_model.h"

namespace moesim::sim::detail {

struct Replica;  // sim/serving/cluster_sim.h

class TraceObserver final : public StepObserver {
 public:
  TraceObserver(std::vector<TraceSlice>* out, const Replica& r, SimTime start)
      : out_(out), replica_(r), start_(start) {}
  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                SimTime duration_ns) override;

 private:
  std::vector<TraceSlice>* out_;
  const Replica& replica_;
  SimTime start_;
};

// Records per-expert routing for the step trace: splits each (src, dst GPU) selection count
// over the destination's experts by their selection shares, from its own RNG stream, so that
// recording never changes the simulation.
class RecordObserver final : public StepObserver {
 public:
  RecordObserver(StepRecord* rec, const Replica& r, const ExpertPlacement* placement,
                 RngStream& rng)
      : rec_(rec), replica_(r), placement_(placement), rng_(rng) {}
  StepObserver* chained = nullptr;
  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                SimTime duration_ns) override {
    if (chained) chained->on_slice(gpu_idx, name, layer_idx, start_ns, duration_ns);
  }
  void on_routing(int32_t layer_idx, int32_t moe_layer_idx, const CountMatrix& src_dst,
                  double dispatch_bytes, double combine_bytes) override;

 private:
  StepRecord* rec_;
  const Replica& replica_;
  const ExpertPlacement* placement_;
  RngStream& rng_;
};

}  // namespace moesim::sim::detail
