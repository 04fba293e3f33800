// The cost-model interface: an operation's work -> its duration on one GPU.
//
// Implementations: "roofline" (hardware peaks x per-op efficiencies, sim/cost/roofline.h) and
// "calibrated" (fits of engine measurements, sim/calibration). Scenarios choose one in [cost].
// Durations are double seconds; the caller rounds once when it turns them into SimTime.
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/cost/op_work.h"

namespace moesim::sim {

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string_view name() const = 0;
  // Seconds to run `work` on one GPU; 0 for empty work.
  virtual double seconds(const OpWork& work) const = 0;
  // Queries outside the range the model was fitted on (calibrated models); 0 for roofline.
  virtual int64_t num_out_of_range_queries() const { return 0; }
};

}  // namespace moesim::sim
