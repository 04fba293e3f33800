// The cost-model interface: an operation's work -> its duration on one GPU.
//
// Implementations: "roofline" (hardware peaks x per-op efficiencies, sim/cost/roofline.h) and
// "calibrated" (fits of engine measurements, sim/calibration). Scenarios choose one in [cost].
// Durations are double seconds; the caller rounds once when it turns them into SimTime.
// Callers that time a simulation use checked_seconds(): a duration that is negative, not a
// number or beyond the horizon (sim/core/horizon.h; an absurd coefficient in a profile, a GPU
// peak of almost nothing) is bad input, not a number to round.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/core/horizon.h"
#include "sim/cost/op_work.h"

namespace moesim::sim {

// A cost model's queries by op kind (indexed by OpKind) that no fit priced inside its range:
// `out_of_range` ones were extrapolated with no stated rule; `by_rule` ones were priced by a
// stated rule (docs/calibration.md, "Where no fit applies").
struct CostQueryCounts {
  std::array<int64_t, kNumOpKinds> out_of_range{};
  std::array<int64_t, kNumOpKinds> by_rule{};
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string_view name() const = 0;
  // Seconds to run `work` on one GPU; 0 for empty work.
  virtual double seconds(const OpWork& work) const = 0;
  // Queries outside the range the model was fitted on and priced by no stated rule (calibrated
  // models); 0 for roofline.
  virtual int64_t num_out_of_range_queries() const { return 0; }
  // Per op kind: out-of-range queries and those priced by a stated rule; all 0 for roofline.
  virtual CostQueryCounts query_counts() const { return {}; }
  // Whether seconds() counts its queries (num_out_of_range_queries): then every query must be
  // asked, else a caller may keep a result and reuse it for equal work (seconds() is a pure
  // function of the work).
  virtual bool counts_queries() const { return false; }
  // The inputs its durations are computed from, as a noun phrase for error messages ("the
  // coefficients of calibration profile 'x'"): what a user should check.
  virtual std::string describe_inputs() const { return "the cost model's parameters"; }

  // seconds(work), or a HorizonError naming the op, its work, the model and describe_inputs()
  // when that is negative, not a number or beyond the horizon. One comparison on the normal
  // path.
  double checked_seconds(const OpWork& work) const {
    const double s = seconds(work);
    if (!within_horizon_s(s)) [[unlikely]] {
      throw_bad_op_duration(work, s);
    }
    return s;
  }

 private:
  [[noreturn]] void throw_bad_op_duration(const OpWork& work, double seconds) const;
};

}  // namespace moesim::sim
