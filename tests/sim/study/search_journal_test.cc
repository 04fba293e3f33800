#include "sim/study/search_journal.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/config/config_error.h"
#include "sim/study/search_record.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::study {
namespace {

SearchJournalHeader header() {
  SearchJournalHeader h;
  h.scenario_path = "tiny.toml";
  h.slo = "ttft_p99_ms=150";
  h.seed = 3;
  h.num_configs = 3;
  return h;
}

ConfigSearch searched(int64_t idx, double max_ok) {
  ConfigSearch c;
  c.config_idx = idx;
  c.num_gpus = 2;
  c.search = {true, max_ok, 2 * max_ok, 4};
  return c;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SearchJournal, AKilledSearchResumesWithTheConfigurationsItJournaled) {
  const std::string path = scratch::path("search.journal");
  std::filesystem::remove(path);  // a journal of an earlier run of the test is not this one's
  {
    SearchJournal journal(path, header(), false);
    EXPECT_TRUE(journal.already_done().empty());
    journal.record(searched(0, 1.5));
    journal.record(searched(2, 0.25));
  }
  // A kill cut the last line short.
  const std::string text = read(path);
  std::ofstream(path, std::ios::binary | std::ios::app) << "{\"idx\": 1, \"err";

  SearchJournal resumed(path, header(), true);
  EXPECT_EQ(resumed.already_done(), (std::vector<bool>{true, false, true}));
  resumed.record(searched(1, 4));
  SearchResult r;
  for (int64_t i = 0; i < 3; ++i) r.configs.push_back(searched(i, 0));
  EXPECT_EQ(resumed.finish(r), 2u);
  EXPECT_EQ(r.configs[0].search.max_ok, 1.5);
  EXPECT_EQ(r.configs[2].search.max_ok, 0.25);
  EXPECT_EQ(r.configs[1].search.max_ok, 0);  // searched by this process, not read back
  // The cut line is gone; the new one follows the kept ones.
  EXPECT_EQ(read(path), text + search_record_json(searched(1, 4)).dump() + "\n");
}

// Starting afresh on a journal that holds searched configurations would discard them: refused,
// naming how many.
TEST(SearchJournal, RefusesAJournalWithConfigurationsWithoutResume) {
  const std::string path = scratch::path("finished.journal");
  std::filesystem::remove(path);
  {
    SearchJournal journal(path, header(), false);
    journal.record(searched(0, 1.5));
    journal.record(searched(1, 2));
  }
  const std::string text = read(path);
  try {
    SearchJournal journal(path, header(), false);
    FAIL() << "the searched configurations were discarded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.key_path(), "--journal");
    EXPECT_EQ(e.reason(),
              "holds 2 searched configurations: add --resume to continue from them, or delete "
              "the file to start over");
  }
  EXPECT_EQ(read(path), text);
  SearchJournal resumed(path, header(), true);
  EXPECT_EQ(resumed.already_done(), (std::vector<bool>{true, true, false}));
}

TEST(SearchJournal, RefusesTheJournalOfAnotherSearch) {
  const std::string path = scratch::path("other.journal");
  std::filesystem::remove(path);  // a journal of an earlier run of the test is not this one's
  { SearchJournal journal(path, header(), false); }
  SearchJournalHeader other = header();
  other.slo = "ttft_p99_ms=200";
  try {
    SearchJournal journal(path, other, true);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.line(), 1);
    EXPECT_NE(e.reason().find("another search"), std::string::npos);
  }
  std::ofstream(path, std::ios::binary | std::ios::app) << "[1, 2]\n";
  try {
    SearchJournal journal(path, header(), true);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.reason(), "not a searched configuration");
  }
}

}  // namespace
}  // namespace moesim::sim::study
