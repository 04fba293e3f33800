// "Meets the SLOs" for one run: every percentile limit holds (over the samples of the run summary)
// and the attainment, met / decided, is at least min_attainment. Attainment is the one of every
// command (slo_status, sim/metrics/run_metrics.h), with the per-request limits of the --slo
// option: met are the requests completed within the limits; decided are the met and those that
// missed (completed outside a limit, rejected, or in flight past the TTFT limit at the end).
// Requests still running within their limits are not counted.
#pragma once

#include <cstdint>
#include <string>

#include "sim/metrics/slo_watch.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"
#include "sim/study/slo_limits.h"

namespace moesim::sim::study {

// The verdict on one run. A limit over no data is not met: a percentile limit over no samples
// ("ttft_p99_ms n/a (no samples)") and, when min_attainment > 0, an attainment with no decided
// request.
struct SloVerdict {
  bool meets = false;
  int64_t num_met = 0, num_decided = 0;  // count_slo (sim/metrics/run_metrics.h)
  double attainment = 0;                 // num_met / num_decided; 0 (no data) when none decided
  std::string reason;  // the first limit broken, e.g. "ttft_p99_ms 2301 > 2000"; "" if met
  // The run's measured window did not converge (MeasurementSummary): a verdict that would have
  // met the limits is unknown, and fails with the window's reason.
  bool not_converged = false;
};
// A run stopped by an early verdict (RunOutput::stopped_early) fails with that reason; a
// cancelled one (RunOutput::cancelled) fails with reason "cancelled". A run whose measured
// window did not converge (steady state, docs/outputs.md) fails: with the first limit broken
// when one is, else as unknown with the window's reason ("no steady state: ...").
SloVerdict judge_run(const RunOutput& out, const Scenario& scenario, const SearchSlo& slo);
// The limits a probe of `scenario` watches for an early verdict (RunOptions::
// stop_on_certain_failure): the percentile limits, the per-request limits and the attainment.
SloWatchLimits watch_limits(const Scenario& scenario, const SearchSlo& slo);

}  // namespace moesim::sim::study
