#include "engine/timing.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/check.h"

namespace moesim::engine {

std::string_view estimator_name(Estimator e) {
  switch (e) {
    case Estimator::kMin:
      return "min";
    case Estimator::kMedian:
      return "median";
    case Estimator::kTrimmedMean:
      return "trimmed_mean";
  }
  return "min";
}

std::optional<Estimator> parse_estimator(std::string_view name) {
  for (Estimator e : {Estimator::kMin, Estimator::kMedian, Estimator::kTrimmedMean}) {
    if (estimator_name(e) == name) return e;
  }
  return std::nullopt;
}

std::string_view pin_mode_name(PinMode m) {
  switch (m) {
    case PinMode::kAuto:
      return "auto";
    case PinMode::kOn:
      return "on";
    case PinMode::kOff:
      return "off";
  }
  return "auto";
}

std::optional<PinMode> parse_pin_mode(std::string_view name) {
  for (PinMode m : {PinMode::kAuto, PinMode::kOn, PinMode::kOff}) {
    if (pin_mode_name(m) == name) return m;
  }
  return std::nullopt;
}

// ---- Run-queue wait ----

std::optional<int64_t> parse_schedstat_wait_ns(std::string_view text) {
  int64_t fields[2] = {0, 0};
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int64_t& f : fields) {
    while (p < end && *p == ' ') ++p;
    const auto [next, ec] = std::from_chars(p, end, f);
    if (ec != std::errc() || next == p || f < 0) return std::nullopt;
    p = next;
  }
  if (p < end && *p != ' ' && *p != '\n') return std::nullopt;
  return fields[1];
}

SchedstatWaitSource::SchedstatWaitSource(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      available_ = false;
      continue;
    }
    fds_.push_back(fd);
  }
}

SchedstatWaitSource::~SchedstatWaitSource() {
  for (int fd : fds_) ::close(fd);
}

std::optional<int64_t> SchedstatWaitSource::total_wait_ns() {
  if (!available_ || fds_.empty()) return std::nullopt;
  int64_t total = 0;
  char buf[128];
  for (int fd : fds_) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), 0);
    if (n <= 0) return std::nullopt;
    const std::optional<int64_t> wait = parse_schedstat_wait_ns(std::string_view(buf, n));
    if (!wait) return std::nullopt;
    total += *wait;
  }
  return total;
}

std::unique_ptr<WaitSource> thread_wait_source(const std::vector<int>& worker_tids) {
  std::vector<std::string> paths;
  const int self = static_cast<int>(::syscall(SYS_gettid));
  paths.push_back("/proc/self/task/" + std::to_string(self) + "/schedstat");
  for (int tid : worker_tids) {
    if (tid != self) paths.push_back("/proc/self/task/" + std::to_string(tid) + "/schedstat");
  }
  return std::make_unique<SchedstatWaitSource>(paths);
}

// ---- Estimators ----

int64_t median_ns(std::vector<int64_t> samples) {
  MOESIM_CHECK(!samples.empty(), "median of no samples");
  const size_t mid = (samples.size() - 1) / 2;
  std::nth_element(samples.begin(), samples.begin() + mid, samples.end());
  return samples[mid];
}

int64_t trimmed_mean_ns(std::vector<int64_t> samples) {
  MOESIM_CHECK(!samples.empty(), "trimmed mean of no samples");
  std::sort(samples.begin(), samples.end());
  const size_t cut = samples.size() / 4;
  double sum = 0;
  for (size_t i = cut; i < samples.size() - cut; ++i) sum += static_cast<double>(samples[i]);
  return std::llround(sum / static_cast<double>(samples.size() - 2 * cut));
}

namespace {

int64_t estimate(Estimator e, const std::vector<int64_t>& samples) {
  switch (e) {
    case Estimator::kMin:
      return *std::min_element(samples.begin(), samples.end());
    case Estimator::kMedian:
      return median_ns(samples);
    case Estimator::kTrimmedMean:
      return trimmed_mean_ns(samples);
  }
  return median_ns(samples);
}

}  // namespace

// ---- The sample loop ----

SampleSet::SampleSet(int repeats, const TimingPolicy& policy)
    : repeats_(repeats),
      policy_(policy),
      max_runs_(repeats + (policy.max_extra_runs < 0 ? repeats : policy.max_extra_runs)) {
  MOESIM_CHECK(repeats >= 1, "SampleSet: repeats >= 1");
  MOESIM_CHECK(policy.max_wait_fraction > 0, "SampleSet: max_wait_fraction > 0");
}

bool SampleSet::is_clean(size_t i) const {
  // Unknown wait: nothing tells the sample was disturbed.
  return !waits_ns_[i] || static_cast<double>(*waits_ns_[i]) <=
                              policy_.max_wait_fraction * static_cast<double>(samples_ns_[i]);
}

void SampleSet::add(int64_t elapsed_ns, std::optional<int64_t> wait_ns) {
  samples_ns_.push_back(elapsed_ns);
  waits_ns_.push_back(wait_ns);
  if (is_clean(samples_ns_.size() - 1)) ++num_clean_;
}

bool SampleSet::done() const {
  const int runs = static_cast<int>(samples_ns_.size());
  if (runs < repeats_) return false;
  return num_clean_ >= repeats_ || runs >= max_runs_;
}

TimingStats SampleSet::stats() const {
  MOESIM_CHECK(!samples_ns_.empty(), "SampleSet::stats before any sample");
  TimingStats t;
  t.estimator = policy_.estimator;
  t.samples_ns = samples_ns_;
  const bool waits_known =
      std::all_of(waits_ns_.begin(), waits_ns_.end(), [](const auto& w) { return w.has_value(); });
  if (waits_known) {
    for (const auto& w : waits_ns_) t.samples_wait_ns.push_back(*w);
  }
  t.num_clean = num_clean_;
  t.extra_runs = std::max(0, static_cast<int>(samples_ns_.size()) - repeats_);
  t.noisy = num_clean_ < repeats_;
  // The samples the statistics come from: the clean ones, or all when none is clean.
  std::vector<size_t> used;
  for (size_t i = 0; i < samples_ns_.size(); ++i) {
    if (num_clean_ == 0 || is_clean(i)) used.push_back(i);
  }
  std::vector<int64_t> values;
  for (size_t i : used) values.push_back(samples_ns_[i]);
  t.estimate_ns = estimate(policy_.estimator, values);
  t.median_ns = median_ns(values);
  t.min_ns = *std::min_element(values.begin(), values.end());
  t.max_ns = *std::max_element(values.begin(), values.end());
  if (waits_known) {
    // The reported samples: for min and median the one sample of that value (the first in run
    // order), for the trimmed mean every sample inside the trimmed range.
    double sum = 0;
    int n = 0;
    if (policy_.estimator == Estimator::kTrimmedMean) {
      std::vector<size_t> order = used;
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return samples_ns_[a] < samples_ns_[b]; });
      const size_t cut = order.size() / 4;
      for (size_t k = cut; k < order.size() - cut; ++k, ++n) sum += *waits_ns_[order[k]];
    } else {
      for (size_t i : used) {
        if (samples_ns_[i] == t.estimate_ns) {
          sum = static_cast<double>(*waits_ns_[i]);
          n = 1;
          break;
        }
      }
    }
    if (n > 0) t.wait_ns = std::llround(sum / n);
  }
  return t;
}

void time_one_sample(Timer& timer, WaitSource* waits, const std::function<void()>& op,
                     SampleSet& samples) {
  const std::optional<int64_t> before = waits ? waits->total_wait_ns() : std::nullopt;
  timer.start();
  op();
  timer.stop();
  const int64_t elapsed = timer.elapsed_ns();
  const std::optional<int64_t> after = waits ? waits->total_wait_ns() : std::nullopt;
  std::optional<int64_t> wait;
  if (before && after) wait = std::max<int64_t>(0, *after - *before);
  samples.add(elapsed, wait);
}

TimingStats time_op(Backend& backend, int warmup_runs, int repeats, const std::function<void()>& op,
                    const TimingPolicy& policy) {
  MOESIM_CHECK(repeats >= 1 && warmup_runs >= 0, "time_op: repeats >= 1, warmup >= 0");
  for (int i = 0; i < warmup_runs; ++i) op();
  backend.synchronize();
  std::unique_ptr<Timer> timer = backend.make_timer();
  std::unique_ptr<WaitSource> waits = thread_wait_source(backend.worker_thread_ids());
  SampleSet samples(repeats, policy);
  while (!samples.done()) time_one_sample(*timer, waits.get(), op, samples);
  return samples.stats();
}

TimingStats time_collective(Backend& backend, int warmup_runs, int repeats,
                            const std::function<void()>& op, const TimingPolicy& policy) {
  MOESIM_CHECK(repeats >= 1 && warmup_runs >= 0, "time_collective: repeats >= 1, warmup >= 0");
  for (int i = 0; i < warmup_runs; ++i) op();
  backend.synchronize();
  std::unique_ptr<Timer> timer = backend.make_collective_timer();
  std::unique_ptr<WaitSource> waits = thread_wait_source(backend.worker_thread_ids());
  SampleSet samples(repeats, collective_policy(policy));
  while (!samples.done()) time_one_sample(*timer, waits.get(), op, samples);
  return samples.stats();
}

TimingPolicy collective_policy(const TimingPolicy& policy) {
  TimingPolicy p = policy;
  p.max_extra_runs = 0;
  return p;
}

void record_timing(const TimingStats& t, OpRecord& r) {
  r.measured = true;
  r.measured_ns = t.estimate_ns;
  r.min_ns = t.min_ns;
  r.max_ns = t.max_ns;
  r.estimator = std::string(estimator_name(t.estimator));
  r.wait_ns = t.wait_ns;
  r.noisy = t.noisy;
  r.retries = t.extra_runs;
  r.samples_ns = t.samples_ns;
  r.samples_wait_ns = t.samples_wait_ns;
}

// ---- Pinning ----

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::optional<std::vector<int>> slot_cpus(const std::vector<int>& allowed, int slot, int num_slots,
                                          int threads_per_slot) {
  MOESIM_CHECK(slot >= 0 && slot < num_slots && threads_per_slot >= 1, "slot_cpus: bad slot");
  if (static_cast<int64_t>(num_slots) * threads_per_slot > static_cast<int64_t>(allowed.size())) {
    return std::nullopt;
  }
  const auto begin = allowed.begin() + static_cast<int64_t>(slot) * threads_per_slot;
  return std::vector<int>(begin, begin + threads_per_slot);
}

bool pin_op_threads(PinMode mode, int slot, int num_slots, const std::vector<int>& worker_tids) {
  const int self = static_cast<int>(::syscall(SYS_gettid));
  std::vector<int> tids = {self};
  for (int tid : worker_tids) {
    if (tid != self) tids.push_back(tid);
  }
  const int threads = static_cast<int>(tids.size());
  if (mode == PinMode::kOff || (mode == PinMode::kAuto && num_slots * threads < 2)) return false;
  const std::optional<std::vector<int>> cpus = slot_cpus(allowed_cpus(), slot, num_slots, threads);
  if (!cpus) return false;
  for (int i = 0; i < threads; ++i) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((*cpus)[i], &set);
    if (::sched_setaffinity(tids[i], sizeof(set), &set) != 0) return false;
  }
  return true;
}

}  // namespace moesim::engine
