// Timing one operation so that the figure survives a shared machine.
//
// Each timed run (a sample) is bracketed by the backend's Timer (CUDA events on GPUs; the
// thread's CPU time or steady_clock on the CPU) and by the run-queue wait of the threads that
// run the op: the second field of /proc/self/task/TID/schedstat, nanoseconds the thread was
// runnable but waiting for a CPU. A sample whose wait exceeds a fraction of the sample was
// disturbed by other processes (preempted: its caches were evicted; with a wall clock, the
// wait itself is in the sample): it is left out and another run replaces it, a bounded number of
// times; when too few clean samples remain the timing is flagged noisy. The reported time is an
// estimator (minimum, median or trimmed mean) over the clean samples, stated in every record.
// docs/engine.md ("Timing on a shared machine") gives the defaults and the evidence for them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend.h"
#include "engine/measurement.h"

namespace moesim::engine {

enum class Estimator { kMin, kMedian, kTrimmedMean };
// "min", "median", "trimmed_mean".
std::string_view estimator_name(Estimator e);
// The estimator of a name estimator_name() gives; nullopt for any other text.
std::optional<Estimator> parse_estimator(std::string_view name);

// Whether the threads that run ops are pinned to CPUs of their own (sched_setaffinity).
// kAuto: when two or more threads run ops (ranks, backend workers) and the process may use at
// least as many CPUs; kOn: also a lone thread; kOff: never.
enum class PinMode { kAuto, kOn, kOff };
std::string_view pin_mode_name(PinMode m);
std::optional<PinMode> parse_pin_mode(std::string_view name);

struct TimingPolicy {
  Estimator estimator = Estimator::kMin;
  // A sample is noisy when its run-queue wait exceeds this fraction of the sample (> 0).
  double max_wait_fraction = 0.1;
  // Extra timed runs allowed per op to replace noisy samples; -1 = as many as `repeats`.
  int max_extra_runs = -1;
  PinMode pin = PinMode::kAuto;
  // Set by whoever pinned (or not) the threads, for the measurement header.
  bool pinned = false;
};

// Run-queue wait (ns) of the threads that run an op, summed; nullopt when unavailable (no
// schedstat on this kernel).
class WaitSource {
 public:
  virtual ~WaitSource() = default;
  virtual std::optional<int64_t> total_wait_ns() = 0;
};

// The second field of a schedstat line ("run_ns wait_ns timeslices"); nullopt when malformed.
std::optional<int64_t> parse_schedstat_wait_ns(std::string_view text);

// The summed wait of schedstat files, each kept open and re-read (pread) on every call. A file
// that cannot be opened makes the whole source unavailable.
class SchedstatWaitSource : public WaitSource {
 public:
  explicit SchedstatWaitSource(const std::vector<std::string>& paths);
  ~SchedstatWaitSource() override;
  SchedstatWaitSource(const SchedstatWaitSource&) = delete;
  SchedstatWaitSource& operator=(const SchedstatWaitSource&) = delete;
  std::optional<int64_t> total_wait_ns() override;

 private:
  std::vector<int> fds_;
  bool available_ = true;
};

// /proc/self/task/TID/schedstat of the calling thread and of `worker_tids`.
std::unique_ptr<WaitSource> thread_wait_source(const std::vector<int>& worker_tids);

// Statistics of one op's timed runs.
struct TimingStats {
  Estimator estimator = Estimator::kMin;
  int64_t estimate_ns = 0;  // the estimator over the clean samples (all samples if none is)
  int64_t median_ns = 0;    // lower median of the clean samples (all if none is clean)
  int64_t min_ns = 0;       // over the same samples
  int64_t max_ns = 0;
  std::vector<int64_t> samples_ns;       // every timed run, in run order, retries included
  std::vector<int64_t> samples_wait_ns;  // the wait around each; empty when unavailable
  std::optional<int64_t> wait_ns;        // mean wait of the samples the estimate came from
  int num_clean = 0;
  int extra_runs = 0;  // timed runs beyond `repeats`
  bool noisy = false;  // fewer than `repeats` clean samples after the extra runs
};

// The samples of one op as they come: the timing loop of time_op, and the building block of an
// interleaved schedule (one sample per op per round, each op holding its SampleSet until
// done()).
class SampleSet {
 public:
  SampleSet(int repeats, const TimingPolicy& policy);
  // One timed run: elapsed ns and the wait around it (nullopt when unknown).
  void add(int64_t elapsed_ns, std::optional<int64_t> wait_ns);
  // `repeats` clean samples, or the extra runs are spent.
  bool done() const;
  TimingStats stats() const;

 private:
  bool is_clean(size_t i) const;
  int repeats_;
  TimingPolicy policy_;
  int max_runs_;
  std::vector<int64_t> samples_ns_;
  std::vector<std::optional<int64_t>> waits_ns_;
  int num_clean_ = 0;
};

// One timed run of `op` into `samples`: the wait read before the timer starts and after it
// stops (waits may be null: unknown).
void time_one_sample(Timer& timer, WaitSource* waits, const std::function<void()>& op,
                     SampleSet& samples);

// Runs `op` warmup_runs times untimed, synchronises the backend, then times it until the
// SampleSet is done (repeats >= 1), reading the wait of the calling thread and the backend's
// worker threads.
TimingStats time_op(Backend& backend, int warmup_runs, int repeats, const std::function<void()>& op,
                    const TimingPolicy& policy = {});

// time_op for a collective: the backend's collective timer (wall clock on the CPU) and
// collective_policy(policy).
TimingStats time_collective(Backend& backend, int warmup_runs, int repeats,
                            const std::function<void()>& op, const TimingPolicy& policy);

// The policy for an op every rank must run equally often (a collective: each rank judges its
// own samples, so retries would pair different exchanges): `policy` without extra runs. Noisy
// samples are still left out of the estimate and flagged.
TimingPolicy collective_policy(const TimingPolicy& policy);

// Copies a timing into an op record (measured, the estimate as measured_ns, the samples).
void record_timing(const TimingStats& t, OpRecord& r);

// Median (lower median for an even count) of non-empty `samples`.
int64_t median_ns(std::vector<int64_t> samples);
// Mean of the samples left after dropping floor(n / 4) from each end (non-empty `samples`).
int64_t trimmed_mean_ns(std::vector<int64_t> samples);

// ---- Pinning ----
// The CPUs this process may run on (sched_getaffinity), ascending; empty when unknown.
std::vector<int> allowed_cpus();
// The CPUs for slot `slot` of `num_slots` slots of `threads_per_slot` threads each: distinct
// CPUs of `allowed`, slot s taking [s * threads_per_slot, (s + 1) * threads_per_slot); nullopt
// when `allowed` has too few.
std::optional<std::vector<int>> slot_cpus(const std::vector<int>& allowed, int slot, int num_slots,
                                          int threads_per_slot);
// Pins the calling thread and `worker_tids` (slot `slot` of `num_slots` alike) per `mode`;
// returns whether they were pinned.
bool pin_op_threads(PinMode mode, int slot, int num_slots, const std::vector<int>& worker_tids);

}  // namespace moesim::engine
