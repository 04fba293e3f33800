// Streaming request statistics: what the run summary needs of the requests, accumulated one
// finished record at a time, so that a run keeps no record after it is counted (a run of a
// million requests holds only those in flight; docs/outputs.md, "Memory").
//
// Percentiles are exact (numpy's linear interpolation between closest ranks) up to
// PercentileSketch::kExactSamples values. Beyond that the values are folded into buckets that
// keep the top 10 mantissa bits of each double: a bucket spans a relative width of 2^-10, and a
// percentile is read at its bucket's midpoint, clamped to the exact minimum and maximum, so it
// is within 2^-11 (0.05%) of the exact order statistic it interpolates; mean and max stay
// exact. Both modes are deterministic (no floating-point logarithms, no hashing).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sim/core/time.h"
#include "sim/metrics/run_metrics.h"

namespace moesim::sim {

class PercentileSketch {
 public:
  // Values kept exactly before switching to buckets (8 bytes each).
  static constexpr size_t kExactSamples = 65536;

  // `value` >= 0 (latencies); NaN is a broken invariant.
  void add(double value);
  int64_t count() const { return count_; }
  double sum() const { return sum_; }
  bool exact() const { return num_folded_ == 0; }
  // p50, p90, p99, mean, max, count (all 0 with no samples), as percentiles() computes them.
  Percentiles summary() const;
  // The same with right-censored values: each of `censored` is a lower bound of a value not
  // observed (a request in flight at the end). Without any, summary(); with some, the quantiles
  // of the Kaplan-Meier product-limit estimate (the smallest observed value where the estimated
  // distribution reaches q), or, where the estimate never reaches q, the largest value observed
  // or censored as a lower bound (Percentiles::lower_bound). mean and max stay those of the
  // observed values; count is theirs and num_censored the censored ones.
  Percentiles summary_with_censored(std::vector<double> censored) const;
  // Adds another sketch's values: exact while both are and the total fits kExactSamples, else
  // bucketed (as if every value had been added here).
  void merge(const PercentileSketch& other);

 private:
  void fold(double value);
  void fold_exact();
  // The values in ascending order with their multiplicities (bucket midpoints when bucketed).
  std::vector<std::pair<double, int64_t>> ascending() const;
  // Value at 0-based rank r of the sorted samples (bucketed mode).
  double at_rank(int64_t r) const;

  // Buckets of the values folded (bucketed mode): by the double's exponent bits, then by its top
  // 10 mantissa bits (a count per bucket; an exponent's 1,024 counts allocated at its first
  // value). A fold is two indexings; ranks walk the buckets in key order (the values' order).
  static constexpr size_t kMantissaBuckets = 1024;
  using ExponentBuckets = std::array<int64_t, kMantissaBuckets>;

  std::vector<double> exact_;
  std::vector<std::unique_ptr<ExponentBuckets>> buckets_;  // by exponent (2,048 after a fold)
  int64_t num_folded_ = 0;
  int64_t count_ = 0;
  double sum_ = 0, min_ = 0, max_ = 0;
};

// The summary's request figures, from records added in request-sequence order.
class RequestStats {
 public:
  RequestStats(double slo_ttft_ms, double slo_tpot_ms)
      : slo_ttft_ms_(slo_ttft_ms), slo_tpot_ms_(slo_tpot_ms) {}

  // A record whose outcome is final, or one in flight at the run's end `end_ns`: then its
  // elapsed times are censored values of the percentiles (PercentileSketch::summary_with_censored):
  // queueing and TTFT while it waits for them, end-to-end, and TPOT once it has a first token
  // (the time since, over its requested tokens after the first: the least its TPOT can be).
  void add(const RequestRecord& r, SimTime end_ns);
  // Adds the requests of `other` (same SLO limits), as if each had been added here.
  void merge(const RequestStats& other);

  double slo_ttft_ms() const { return slo_ttft_ms_; }
  double slo_tpot_ms() const { return slo_tpot_ms_; }
  int64_t num_arrived() const { return num_arrived_; }
  int64_t num_completed() const { return num_completed_; }
  int64_t num_rejected() const { return num_rejected_; }
  int64_t num_in_flight() const { return num_in_flight_; }
  int64_t num_waiting_first_token() const { return num_waiting_first_token_; }
  double max_wait_first_token_ms() const { return max_wait_first_token_ms_; }
  int64_t input_tokens() const { return in_tokens_; }
  int64_t output_tokens() const { return out_tokens_; }
  const SloCounts& slo() const { return slo_; }
  const PercentileSketch& queueing_ms() const { return queueing_; }
  const PercentileSketch& ttft_ms() const { return ttft_; }
  const PercentileSketch& tpot_ms() const { return tpot_; }
  const PercentileSketch& e2e_ms() const { return e2e_; }
  const PercentileSketch& kv_load_ms() const { return kv_load_; }
  const PercentileSketch& prefill_ms() const { return prefill_; }
  // Censored values (ms) of the requests in flight at the end, per metric.
  const std::vector<double>& censored_queueing_ms() const { return censored_queueing_; }
  const std::vector<double>& censored_ttft_ms() const { return censored_ttft_; }
  const std::vector<double>& censored_tpot_ms() const { return censored_tpot_; }
  const std::vector<double>& censored_e2e_ms() const { return censored_e2e_; }

 private:
  double slo_ttft_ms_, slo_tpot_ms_;
  int64_t num_arrived_ = 0, num_completed_ = 0, num_rejected_ = 0, num_in_flight_ = 0;
  int64_t num_waiting_first_token_ = 0;
  double max_wait_first_token_ms_ = 0;
  int64_t in_tokens_ = 0, out_tokens_ = 0;
  SloCounts slo_;
  PercentileSketch queueing_, ttft_, tpot_, e2e_, kv_load_, prefill_;
  std::vector<double> censored_queueing_, censored_ttft_, censored_tpot_, censored_e2e_;
};

// Builds the summary from streamed request statistics (summarize() of run_metrics.h adds a
// vector of records to one of these). `duration_ns` is the measured window (rates);
// `gpu_span_ns` the time the GPU records cover (busy fractions), duration_ns when negative.
RunSummary summarize(const RequestStats& requests, const std::vector<GpuRecord>& gpus,
                     const RunCounters& counters, SimTime duration_ns, SimTime gpu_span_ns = -1);

}  // namespace moesim::sim
