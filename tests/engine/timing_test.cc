#include "engine/timing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/cpu/cpu_backend.h"
#include "engine/options.h"

namespace moesim::engine {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Schedstat, ParsesTheWaitField) {
  EXPECT_EQ(parse_schedstat_wait_ns("5548264 21336460 3\n"), 21336460);
  EXPECT_EQ(parse_schedstat_wait_ns("0 0 0"), 0);
  EXPECT_EQ(parse_schedstat_wait_ns(""), std::nullopt);
  EXPECT_EQ(parse_schedstat_wait_ns("123"), std::nullopt);
  EXPECT_EQ(parse_schedstat_wait_ns("12 abc 3"), std::nullopt);
  EXPECT_EQ(parse_schedstat_wait_ns("12 34x 3"), std::nullopt);
  EXPECT_EQ(parse_schedstat_wait_ns("-12 34 3"), std::nullopt);
}

TEST(Schedstat, SumsFakeFilesAndRereadsThem) {
  const fs::path dir = fs::temp_directory_path() / ("moesim_schedstat_" + std::to_string(getpid()));
  fs::create_directories(dir);
  write_file(dir / "a", "100 1000 5\n");
  write_file(dir / "b", "200 20 7\n");
  SchedstatWaitSource source({(dir / "a").string(), (dir / "b").string()});
  EXPECT_EQ(source.total_wait_ns(), 1020);
  write_file(dir / "a", "150 1500 6\n");  // the kernel's counters moved on
  EXPECT_EQ(source.total_wait_ns(), 1520);
  write_file(dir / "b", "garbage\n");
  EXPECT_EQ(source.total_wait_ns(), std::nullopt);

  SchedstatWaitSource missing({(dir / "a").string(), (dir / "absent").string()});
  EXPECT_EQ(missing.total_wait_ns(), std::nullopt);
  fs::remove_all(dir);
}

TEST(Estimators, MinMedianTrimmedMean) {
  EXPECT_EQ(median_ns({30, 10, 20, 40}), 20);  // lower median
  EXPECT_EQ(median_ns({5}), 5);
  // n = 5: one dropped from each end.
  EXPECT_EQ(trimmed_mean_ns({1000, 20, 10, 40, 30}), 30);
  // n = 3: nothing dropped.
  EXPECT_EQ(trimmed_mean_ns({1, 2, 6}), 3);
  // n = 8: two from each end.
  EXPECT_EQ(trimmed_mean_ns({1, 2, 3, 4, 5, 6, 7, 900}), 5);  // (3+4+5+6)/4 = 4.5 -> 5
  EXPECT_EQ(parse_estimator("trimmed_mean"), Estimator::kTrimmedMean);
  EXPECT_EQ(parse_estimator("mean"), std::nullopt);
  EXPECT_EQ(parse_pin_mode("off"), PinMode::kOff);
  EXPECT_EQ(parse_pin_mode("yes"), std::nullopt);
}

TimingPolicy policy(Estimator e, int max_extra_runs) {
  TimingPolicy p;
  p.estimator = e;
  p.max_wait_fraction = 0.1;
  p.max_extra_runs = max_extra_runs;
  return p;
}

TEST(SampleSet, ReplacesNoisySamplesAndEstimatesOverTheCleanOnes) {
  SampleSet s(3, policy(Estimator::kMin, 2));
  s.add(1000, 0);
  s.add(500, 400);   // waited 80% of the sample: noisy, although the fastest
  s.add(1100, 100);  // 10%: clean (the limit is inclusive)
  EXPECT_FALSE(s.done());
  s.add(900, 20);
  EXPECT_TRUE(s.done());
  const TimingStats t = s.stats();
  EXPECT_EQ(t.num_clean, 3);
  EXPECT_EQ(t.extra_runs, 1);
  EXPECT_FALSE(t.noisy);
  EXPECT_EQ(t.estimate_ns, 900);  // the noisy 500 is not the minimum
  EXPECT_EQ(t.min_ns, 900);
  EXPECT_EQ(t.max_ns, 1100);
  EXPECT_EQ(t.median_ns, 1000);
  EXPECT_EQ(t.wait_ns, 20);  // the wait of the reported sample
  EXPECT_EQ(t.samples_ns, (std::vector<int64_t>{1000, 500, 1100, 900}));
  EXPECT_EQ(t.samples_wait_ns, (std::vector<int64_t>{0, 400, 100, 20}));
}

TEST(SampleSet, FlagsNoisyWhenTheExtraRunsAreSpent) {
  SampleSet s(2, policy(Estimator::kMedian, 2));
  s.add(1000, 500);
  s.add(800, 0);
  s.add(1200, 300);
  EXPECT_FALSE(s.done());
  s.add(700, 200);
  EXPECT_TRUE(s.done());  // 2 + 2 runs
  const TimingStats t = s.stats();
  EXPECT_TRUE(t.noisy);
  EXPECT_EQ(t.num_clean, 1);
  EXPECT_EQ(t.extra_runs, 2);
  EXPECT_EQ(t.estimate_ns, 800);  // over the one clean sample
  EXPECT_EQ(t.wait_ns, 0);
}

TEST(SampleSet, AllNoisyFallsBackToEverySample) {
  SampleSet s(3, policy(Estimator::kTrimmedMean, 0));
  s.add(100, 50);
  s.add(300, 50);
  s.add(200, 50);
  EXPECT_TRUE(s.done());  // no extra runs allowed
  const TimingStats t = s.stats();
  EXPECT_TRUE(t.noisy);
  EXPECT_EQ(t.num_clean, 0);
  EXPECT_EQ(t.estimate_ns, 200);  // mean of all three (n = 3 trims nothing)
  EXPECT_EQ(t.wait_ns, 50);
}

TEST(SampleSet, CollectivesRunExactlyTheRepeatsOnEveryRank) {
  // Two ranks judging their own waits must still run an all-to-all equally often.
  TimingPolicy p = policy(Estimator::kMin, -1);
  SampleSet quiet(3, collective_policy(p));
  SampleSet busy(3, collective_policy(p));
  for (int i = 0; i < 3; ++i) {
    quiet.add(100, 0);
    busy.add(100, 90);
  }
  EXPECT_TRUE(quiet.done());
  EXPECT_TRUE(busy.done());
  EXPECT_TRUE(busy.stats().noisy);
  EXPECT_EQ(busy.stats().extra_runs, 0);
}

TEST(SampleSet, DefaultExtraRunsAreTheRepeatsAndUnknownWaitsCountClean) {
  SampleSet bounded(2, policy(Estimator::kMin, -1));
  for (int i = 0; i < 3; ++i) bounded.add(10, 10);
  EXPECT_FALSE(bounded.done());
  bounded.add(10, 10);
  EXPECT_TRUE(bounded.done());

  SampleSet unknown(2, policy(Estimator::kMin, 5));
  unknown.add(10, std::nullopt);
  unknown.add(12, std::nullopt);
  EXPECT_TRUE(unknown.done());
  const TimingStats t = unknown.stats();
  EXPECT_FALSE(t.noisy);
  EXPECT_FALSE(t.wait_ns.has_value());
  EXPECT_TRUE(t.samples_wait_ns.empty());
}

// A clock and a wait counter that advance by scripted amounts on each sample.
class ScriptedTimer : public Timer {
 public:
  explicit ScriptedTimer(std::vector<int64_t> elapsed) : elapsed_(std::move(elapsed)) {}
  void start() override {}
  void stop() override { ++stops_; }
  int64_t elapsed_ns() override { return elapsed_[stops_ - 1]; }

 private:
  std::vector<int64_t> elapsed_;
  size_t stops_ = 0;
};

class ScriptedWaits : public WaitSource {
 public:
  explicit ScriptedWaits(std::vector<int64_t> totals) : totals_(std::move(totals)) {}
  std::optional<int64_t> total_wait_ns() override { return totals_[reads_++]; }
  size_t reads() const { return reads_; }

 private:
  std::vector<int64_t> totals_;
  size_t reads_ = 0;
};

TEST(TimeOneSample, TheWaitIsReadAroundTheTimedRun) {
  ScriptedTimer timer({1000, 1000, 990});
  // Cumulative counters read before and after each run: waits 0, 700, 30.
  ScriptedWaits waits({5000, 5000, 5000, 5700, 5700, 5730});
  SampleSet samples(2, policy(Estimator::kMin, 3));
  int runs = 0;
  while (!samples.done())
    time_one_sample(
        timer, &waits, [&] { ++runs; }, samples);
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(waits.reads(), 6u);
  const TimingStats t = samples.stats();
  EXPECT_EQ(t.samples_wait_ns, (std::vector<int64_t>{0, 700, 30}));
  EXPECT_EQ(t.estimate_ns, 990);
  EXPECT_EQ(t.extra_runs, 1);
  EXPECT_FALSE(t.noisy);
}

TEST(TimeOp, RecordsTheTimingInAnOpRecord) {
  std::unique_ptr<Backend> backend = cpu::make_cpu_backend({});
  TimingPolicy p;
  p.estimator = Estimator::kTrimmedMean;
  int runs = 0;
  const TimingStats t = time_op(
      *backend, 1, 3, [&] { ++runs; }, p);
  EXPECT_GE(runs, 4);
  EXPECT_GE(t.samples_ns.size(), 3u);
  if (fs::exists("/proc/self/schedstat")) {
    EXPECT_EQ(t.samples_wait_ns.size(), t.samples_ns.size());
  }
  OpRecord r;
  record_timing(t, r);
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(r.measured_ns, t.estimate_ns);
  EXPECT_EQ(r.estimator, "trimmed_mean");
  EXPECT_EQ(r.retries, t.extra_runs);

  std::ostringstream out;
  MeasurementWriter writer(out);
  MeasurementHeader h;
  h.estimator = "trimmed_mean";
  h.max_extra_runs = 3;
  h.pinned = true;
  writer.write_header(h);
  writer.write_op(r);
  std::istringstream lines(out.str());
  std::string line;
  std::getline(lines, line);
  const nlohmann::json header = nlohmann::json::parse(line);
  EXPECT_EQ(header["timing"]["estimator"], "trimmed_mean");
  EXPECT_EQ(header["timing"]["pinned"], true);
  std::getline(lines, line);
  const nlohmann::json op = nlohmann::json::parse(line);
  EXPECT_EQ(op["estimator"], "trimmed_mean");
  EXPECT_EQ(op["noisy"], t.noisy);
  EXPECT_EQ(op["samples_ns"].size(), t.samples_ns.size());
}

TEST(Pinning, SlotsTakeDistinctCpus) {
  const std::vector<int> allowed = {0, 2, 5, 7};
  EXPECT_EQ(slot_cpus(allowed, 1, 2, 2), (std::vector<int>{5, 7}));
  EXPECT_EQ(slot_cpus(allowed, 0, 4, 1), (std::vector<int>{0}));
  EXPECT_EQ(slot_cpus(allowed, 3, 4, 1), (std::vector<int>{7}));
  EXPECT_EQ(slot_cpus(allowed, 0, 3, 2), std::nullopt);
  EXPECT_EQ(slot_cpus({}, 0, 1, 1), std::nullopt);
  // Never pinned when off, nor a lone thread in auto.
  EXPECT_FALSE(pin_op_threads(PinMode::kOff, 0, 2, {}));
  EXPECT_FALSE(pin_op_threads(PinMode::kAuto, 0, 1, {}));
}

TEST(TimingFlags, AreCheckedBeforeAnyWork) {
  auto args = [](std::vector<std::string> extra) {
    std::vector<std::string> argv = {"replay", "t.jsonl", "--out", "m.jsonl"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  EXPECT_NO_THROW(parse_engine_args(args({"--estimator", "trimmed_mean", "--retries", "0",
                                          "--max-wait-fraction", "0.25", "--pin", "off"})));
  EXPECT_THROW(parse_engine_args(args({"--estimator", "mode"})), UsageError);
  EXPECT_THROW(parse_engine_args(args({"--pin", "always"})), UsageError);
  EXPECT_THROW(parse_engine_args(args({"--retries", "-1"})), UsageError);
  EXPECT_THROW(parse_engine_args(args({"--max-wait-fraction", "0"})), UsageError);
  EXPECT_THROW(parse_engine_args({"bench", "--pin", "on"}), UsageError);
}

}  // namespace
}  // namespace moesim::engine
