#include "sim/api/search.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "sim/api/usage_error.h"
#include "sim/study/search_journal.h"
#include "tests/sim/api/usage_errors.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::api {
namespace {

const std::string kTiny = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/tiny.toml";
const std::string kGrid = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/grid.toml";

SearchRequest quick() {
  SearchRequest r;
  r.scenario_path = kTiny;
  r.slo = "ttft_p99_ms=150";
  r.max_doublings = 2;
  r.tolerance = 0.3;
  r.threads = 2;
  return r;
}

std::string usage_error(const SearchRequest& r) {
  return testing::usage_error_of([&] { search(r); });
}

TEST(ApiSearch, TheJsonAndTheTextAgreeOnEveryConfiguration) {
  SearchRequest r = quick();
  r.grid_path = kGrid;
  r.target_rate_per_s = 1;
  const SearchReport report = search(r);
  ASSERT_EQ(report.result.configs.size(), 4u);
  const nlohmann::json j = search_json(report);
  ASSERT_EQ(j.at("configs").size(), 4u);
  std::ostringstream text;
  write_search_text(text, report);
  for (const auto& c : report.result.configs) {
    EXPECT_EQ(j.at("configs").at(c.config_idx).at("num_gpus"), c.num_gpus);
    EXPECT_NE(text.str().find(study::overrides_text(c.overrides)), std::string::npos);
  }
  EXPECT_EQ(text.str().rfind("search " + kTiny + "\n  SLO: ttft_p99_ms <= 150,", 0), 0u);
}

TEST(ApiSearch, AResumedJournalGivesTheUninterruptedSearch) {
  SearchRequest r = quick();
  r.grid_path = kGrid;
  r.journal_path = scratch::path("search.journal");
  std::filesystem::remove(*r.journal_path);  // an earlier run's: refused without --resume
  const std::string full = search_json(search(r)).dump();
  r.resume = true;
  const SearchReport resumed = search(r);
  EXPECT_EQ(resumed.num_resumed, 4u);
  EXPECT_EQ(search_json(resumed).dump(), full);
}

TEST(ApiSearch, ChecksTheRequest) {
  SearchRequest r = quick();
  r.slo.reset();
  EXPECT_EQ(usage_error(r), "--slo is required");
  r = quick();
  r.resume = true;
  EXPECT_EQ(usage_error(r), "--resume needs --journal FILE");
  r = quick();
  r.max_doublings = 31;
  EXPECT_EQ(usage_error(r), "--max-doublings must be in 0..30");
  r = quick();
  r.tolerance = 0;
  EXPECT_EQ(usage_error(r), "--tolerance must be in (0, 1]");
}

}  // namespace
}  // namespace moesim::sim::api
