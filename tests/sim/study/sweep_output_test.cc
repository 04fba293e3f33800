#include "sim/study/sweep_output.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/config/config_error.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::study {
namespace {

const std::string kGrid = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/grid.toml";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

SweepOptions two_threads() {
  SweepOptions opt;
  opt.num_threads = 2;
  return opt;
}

// The CSV run_sweep writes for the whole grid.
std::string reference_csv(const SweepSpec& spec, const ScenarioTemplate& t) {
  std::ostringstream os;
  run_sweep(spec, t, two_threads(), os);
  return os.str();
}

TEST(SweepOutput, WritesTheStreamOrTheFileAndKeepsACopy) {
  const SweepSpec spec = load_sweep(kGrid);
  const ScenarioTemplate t = ScenarioTemplate::load(spec.scenario_path);
  const std::string expected = reference_csv(spec, t);
  std::ostringstream stream;
  int64_t last_done = 0;
  const SweepOutcome to_stream =
      write_sweep(spec, t, two_threads(), {std::nullopt, false, &stream}, SingleProcess(),
                  [&](int64_t done, int64_t total, int64_t resumed) {
                    EXPECT_EQ(total, 8);
                    EXPECT_EQ(resumed, 0);
                    last_done = done;
                  });
  EXPECT_EQ(stream.str(), expected);
  EXPECT_EQ(to_stream.csv, expected);
  EXPECT_EQ(to_stream.stats.num_runs, 8);
  EXPECT_EQ(last_done, 8);

  const std::string path = scratch::path("sweep.csv");
  const SweepOutcome to_file =
      write_sweep(spec, t, two_threads(), {path, false, nullptr}, SingleProcess(), {});
  EXPECT_EQ(read(path), expected);
  EXPECT_EQ(to_file.csv, expected);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(SweepOutput, ResumesFromThePartialFileOfAKilledSweep) {
  const SweepSpec spec = load_sweep(kGrid);
  const ScenarioTemplate t = ScenarioTemplate::load(spec.scenario_path);
  const std::string expected = reference_csv(spec, t);
  // The header and three complete rows, then a row cut short.
  size_t at = 0;
  for (int line = 0; line < 4; ++line) at = expected.find('\n', at) + 1;
  const std::string path = scratch::path("resumed.csv");
  std::ofstream(path + ".partial", std::ios::binary) << expected.substr(0, at) << "3,8,1,";
  const SweepOutcome outcome =
      write_sweep(spec, t, two_threads(), {path, true, nullptr}, SingleProcess(),
                  [](int64_t, int64_t total, int64_t resumed) {
                    EXPECT_EQ(resumed, 3);
                    EXPECT_EQ(total, 5);
                  });
  EXPECT_EQ(outcome.num_resumed, 3);
  EXPECT_EQ(outcome.stats.num_runs, 5);
  EXPECT_EQ(read(path), expected);
  EXPECT_EQ(outcome.csv, expected);
}

// Without --resume the finished rows of an interrupted sweep are not thrown away: refused, naming
// how many there are; a journal holding only the header starts afresh.
TEST(SweepOutput, RefusesThePartialFileOfAnInterruptedSweepWithoutResume) {
  const SweepSpec spec = load_sweep(kGrid);
  const ScenarioTemplate t = ScenarioTemplate::load(spec.scenario_path);
  const std::string expected = reference_csv(spec, t);
  size_t at = 0;
  for (int line = 0; line < 4; ++line) at = expected.find('\n', at) + 1;
  const std::string path = scratch::path("interrupted.csv");
  std::filesystem::remove(path);  // the CSV of an earlier run of the test
  const std::string partial = expected.substr(0, at) + "3,8,1,";
  std::ofstream(path + ".partial", std::ios::binary) << partial;
  try {
    write_sweep(spec, t, two_threads(), {path, false, nullptr}, SingleProcess(), {});
    FAIL() << "the finished rows were discarded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), path + ".partial");
    EXPECT_EQ(e.key_path(), "--out");
    EXPECT_EQ(e.reason(),
              "holds 3 finished runs of an interrupted sweep: add --resume to continue it, or "
              "delete the file to start over");
  }
  EXPECT_EQ(read(path + ".partial"), partial);
  EXPECT_FALSE(std::filesystem::exists(path));

  std::ofstream(path + ".partial", std::ios::binary) << expected.substr(0, expected.find('\n') + 1);
  write_sweep(spec, t, two_threads(), {path, false, nullptr}, SingleProcess(), {});
  EXPECT_EQ(read(path), expected);
}

// Two ranks as rank 0 sees them: rank 1 ran shard 2/2 of the grid.
class TwoRanks final : public RankGroup {
 public:
  explicit TwoRanks(std::string other) : other_(std::move(other)) {}
  int32_t rank() const override { return 0; }
  int32_t size() const override { return 2; }
  std::vector<std::string> gather_to_root(const std::string& text) const override {
    return {text, other_};
  }
  int64_t sum(int64_t v) const override { return 2 * v; }
  int64_t max(int64_t v) const override { return v; }

 private:
  std::string other_;
};

TEST(SweepOutput, RankZeroMergesTheShardsOfTheRanks) {
  const SweepSpec spec = load_sweep(kGrid);
  const ScenarioTemplate t = ScenarioTemplate::load(spec.scenario_path);
  SweepOptions shard2 = two_threads();
  shard2.shard = Shard{2, 2};
  std::ostringstream other;
  run_sweep(spec, t, shard2, other);
  SweepOptions shard1 = two_threads();
  shard1.shard = Shard{1, 2};
  const std::string path = scratch::path("merged.csv");
  const SweepOutcome outcome =
      write_sweep(spec, t, shard1, {path, false, nullptr}, TwoRanks(other.str()), {});
  EXPECT_TRUE(outcome.is_root);
  EXPECT_EQ(outcome.stats.num_runs, 8);  // summed over the ranks
  EXPECT_EQ(read(path), reference_csv(spec, t));
}

}  // namespace
}  // namespace moesim::sim::study
