// The measured window of a run: where its warm-up ends and whether what follows is a steady state
// whose figures are stable. The warm-up signal is the number of requests in the system (arrived,
// not yet completed or rejected), time-averaged over 1,024 bins of the run, cut by MSER-5 (White,
// 1997; batches of 5 bins, truncation in the first half only: a minimum in the second half means
// the run still trends, i.e. no steady state). Stability is judged on what the summary reports:
// the batch means (one batch per 1/32 of the run) of the measured requests' TTFT and TPOT, each
// within a relative Student-t 95% half-width. The rules: docs/outputs.md, "Steady state".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/time.h"

namespace moesim::sim {

// [run] settings of the measured window.
struct SteadyStateSpec {
  // Fixed warm-up in seconds; absent: detected (MSER-5).
  std::optional<double> warmup_s;
  // The largest relative 95% half-width of the batch means that counts as converged.
  double max_rel_half_width = 0.05;
};

struct SteadyStateResult {
  SimTime warmup_ns = 0;  // requests arriving from here on are measured
  bool auto_warmup = true;
  // A finite workload whose arrivals ended before the run's last segment (a fixed set of
  // requests, a trace window replayed once, arrivals followed by a drain): a terminating
  // experiment, not a steady state. Every request is measured; the run converges once at most 1%
  // of them are still in flight (the serving layer checks that).
  bool terminating = false;
  bool steady = false;     // a warm-up cut found in the first half (always, with a fixed one)
  bool converged = false;  // steady and both half-widths within the target (judge_convergence)
  // Relative 95% half-widths of the batch means of the measured window: TTFT and TPOT (one batch
  // per segment, judge_convergence), output tokens/s and requests in the system (10 batches of
  // bins; reported, not judged). Absent: too few batches, or a zero mean.
  std::optional<double> ttft_rel_half_width, tpot_rel_half_width;
  std::optional<double> concurrency_rel_half_width, throughput_rel_half_width;
  double mean_in_system = 0;  // time-averaged requests in the system over the measured window
  // Why the run did not converge (judge_convergence); empty when it did.
  std::string reason;
  std::string trend;  // analyse: why it is not steady, when it is not
};

// Time-binned series of the run: requests in the system and output tokens.
class SystemSeries {
 public:
  static constexpr int64_t kBinsPerRun = 1024;
  static constexpr int64_t kBinsPerSegment = 32;  // measured-window boundaries fall on these
  static constexpr int64_t kMserBatch = 5;
  static constexpr int64_t kNumBatches = 10;

  // `run_ns`: the run's first duration (> 0); bins are run_ns / 1,024 wide (at least 1 ns), and
  // the series grows past it when the run is extended.
  explicit SystemSeries(SimTime run_ns);

  SimTime bin_ns() const { return bin_ns_; }
  int64_t in_system() const { return in_system_; }
  SimTime segment_ns() const { return bin_ns_ * kBinsPerSegment; }
  // The latest warm-up end that analyse() can detect in a run ending at `end_ns` (MSER-5 cuts
  // within the first half of its batches, rounded up to a segment).
  SimTime max_auto_warmup_ns(SimTime end_ns) const;

  void on_enter(SimTime now) {
    advance(now);
    ++in_system_;
  }
  void on_leave(SimTime now) {
    advance(now);
    --in_system_;
  }
  void on_tokens(SimTime now, int64_t n) {
    const auto bin = static_cast<size_t>(now / bin_ns_);
    if (bin >= tokens_.size()) grow(bin + 1);
    tokens_[bin] += static_cast<double>(n);
  }

  // A request's first token (its TTFT) and its completion (its TPOT, when it has one), filed
  // under the segment of its arrival: the batches judge_convergence reads.
  void on_first_token(SimTime arrival_ns, double ttft_ms) { file(ttft_, arrival_ns, ttft_ms); }
  void on_complete(SimTime arrival_ns, double tpot_ms) { file(tpot_, arrival_ns, tpot_ms); }
  // Per segment from `from_ns` on, the mean TTFT / TPOT of its requests so far; segments without
  // a value are left out.
  std::vector<double> ttft_means(SimTime from_ns) const { return means(ttft_, from_ns); }
  std::vector<double> tpot_means(SimTime from_ns) const { return means(tpot_, from_ns); }

  // The window of a run that ended at `end_ns`: terminating, or the warm-up cut, whether it is
  // steady, and the bins' half-widths. `arrivals_end_ns`: when the workload's arrivals ended
  // (absent while they go on); before the run's last segment, the run is terminating.
  // Convergence is left to judge_convergence.
  SteadyStateResult analyse(SimTime end_ns, const SteadyStateSpec& spec,
                            std::optional<SimTime> arrivals_end_ns);

 private:
  struct SumCount {
    double sum = 0;
    int64_t count = 0;
  };
  void advance(SimTime now);
  void grow(size_t bins);
  void file(std::vector<SumCount>& v, SimTime arrival_ns, double value) {
    const auto seg = static_cast<size_t>(arrival_ns / segment_ns());
    if (seg >= v.size()) v.resize(seg + 1);
    v[seg].sum += value;
    ++v[seg].count;
  }
  std::vector<double> means(const std::vector<SumCount>& v, SimTime from_ns) const;

  SimTime bin_ns_;
  int64_t in_system_ = 0;
  SimTime last_ns_ = 0;
  std::vector<double> in_system_ns_;   // per bin: integral of the count over time (count x ns)
  std::vector<double> tokens_;         // per bin
  std::vector<SumCount> ttft_, tpot_;  // per arrival segment
};

// MSER-5 truncation of `series` (White, Cobb and Spratt, 2000): the number of leading batches of 5
// values to drop that minimises the squared standard error of the rest's mean, searched over the
// first half of the batches. `found` is false when the minimum is the last candidate (the series
// still trends) or there are fewer than 2 batches.
struct MserCut {
  int64_t batches_dropped = 0;
  bool found = false;
};
MserCut mser5(const std::vector<double>& series);

// Sets r.converged and r.reason from the per-segment means of the measured requests' TTFT and
// TPOT (SystemSeries::ttft_means, tpot_means): steady, at least kNumBatches segments with values
// for each, and both relative half-widths (means_rel_half_width) within spec.max_rel_half_width. A
// terminating run is converged.
void judge_convergence(SteadyStateResult& r, const std::vector<double>& ttft_means,
                       const std::vector<double>& tpot_means, const SteadyStateSpec& spec);

// Relative Student-t 95% half-width of the mean of `batch_means` (one value per batch, k - 1
// degrees of freedom). Absent with fewer than two values or a zero mean.
std::optional<double> means_rel_half_width(const std::vector<double>& batch_means);

// Relative 95% half-width of the mean of `values` by batch means (kNumBatches equal batches of
// the last values; the first len % kNumBatches dropped), Student-t with kNumBatches - 1 degrees
// of freedom. Absent with fewer values than batches or a zero mean.
std::optional<double> batch_means_rel_half_width(const std::vector<double>& values);

}  // namespace moesim::sim
