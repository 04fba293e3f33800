#include "sim/api/compare.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/api/usage_error.h"

namespace moesim::sim::api {
namespace {

const std::string kTiny = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/tiny.toml";

TEST(ApiCompare, NamesTheChangesOfEachSideAndWritesBothForms) {
  CompareRequest r;
  r.a.path = kTiny;
  r.a.dropped = {"slo"};
  r.b.path = kTiny;
  r.b.overrides = {study::parse_override("scheduler.max_seqs=1", "--set-b")};
  r.resamples = 50;
  r.threads = 2;
  const CompareReport report = compare(r);
  EXPECT_EQ(report.changes_a, "without slo");
  EXPECT_EQ(report.changes_b, "scheduler.max_seqs=1");
  EXPECT_EQ(report.options.num_resamples, 50);
  EXPECT_EQ(report.options.seed, 11u);  // A's [run] seed
  const nlohmann::json j = compare_json(report);
  EXPECT_EQ(j.at("changes").at("a"), "without slo");
  EXPECT_EQ(j.at("method"), "requests");
  EXPECT_NE(j.at("digests").at("a"), j.at("digests").at("b"));
  std::ostringstream text;
  write_compare_text(text, report);
  EXPECT_EQ(text.str().rfind("compare  A = " + kTiny + " (without slo)\n", 0), 0u) << text.str();
  EXPECT_EQ(report.exit_code(), 0);
}

TEST(ApiCompare, ChecksTheRequest) {
  CompareRequest r;
  r.a.path = r.b.path = kTiny;
  r.confidence = 1.0;
  try {
    compare(r);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(e.message, "--confidence must be in (0, 1)");
  }
}

}  // namespace
}  // namespace moesim::sim::api
