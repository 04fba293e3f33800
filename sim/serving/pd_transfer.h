// Prefill / decode disaggregation's KV transfer (docs/serving.md, "P/D"): a sequence whose prefill
// finished on a prefill replica moves its KV to a decode replica as one flow from its rank's GPU
// to the decode replica's GPU of the same rank index, timed by the scenario's network model on
// the whole topology.
#pragma once

#include <memory>

#include "sim/core/time.h"
#include "sim/metrics/run_metrics.h"
#include "sim/network/network_model.h"
#include "sim/network/traffic_matrix.h"
#include "sim/serving/replica.h"
#include "sim/serving/sequence.h"

namespace moesim::sim {

class PdTransfer {
 public:
  explicit PdTransfer(std::unique_ptr<NetworkModel> network) : network_(std::move(network)) {}
  // The duration of moving `s`'s KV (its prompt and the tokens generated but the last) from
  // replica `src` to replica `dst`; counted in `counters`.
  SimTime price(const Replica& src, const Replica& dst, const Seq& s, RunCounters& counters);

 private:
  std::unique_ptr<NetworkModel> network_;
  TrafficMatrix traffic_;
  CollectiveResult result_;
};

}  // namespace moesim::sim
