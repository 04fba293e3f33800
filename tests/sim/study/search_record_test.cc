#include "sim/study/search_record.h"

#include <gtest/gtest.h>

#include <map>

namespace moesim::sim::study {
namespace {

ConfigSearch searched(int64_t idx) {
  ConfigSearch c;
  c.config_idx = idx;
  c.num_gpus = 4 + idx;
  c.rate_unit = "req/s";
  c.base_rate_per_s = 40.0 / 3;
  c.trace_rate_per_s = 0.1 + idx;
  c.trace_multiplier = 2;
  c.price = {2.5, "flag"};
  c.diagnosis.done = true;
  c.diagnosis.num_requests = 17;
  c.diagnosis.where = "replica 0";
  c.diagnosis.findings.push_back({"ttft_p99_ms<=5", 3, 17, true, "too long"});
  c.search = {true, 1.5, 1.75, 6};
  c.max_rate_per_s = c.base_rate_per_s * 1.5;
  c.fail_rate_per_s = c.base_rate_per_s * 1.75;
  RateProbe p;
  p.multiplier = 1.5;
  p.rate_per_s = c.max_rate_per_s;
  p.verdict = {true, 9, 10, 0.9, ""};
  p.output_tokens_per_s = 1234.5;
  c.probes = {p, p};
  c.probes[1].verdict = {false, 1, 3, 1.0 / 3, "ttft_p99_ms 9 > 5"};
  c.probes[1].ttft_p99_ms = 9.0000000001;
  return c;
}

void expect_same(const ConfigSearch& a, const ConfigSearch& b) {
  EXPECT_EQ(search_record_json(a).dump(), search_record_json(b).dump());
  EXPECT_EQ(a.base_rate_per_s, b.base_rate_per_s);
  ASSERT_EQ(a.probes.size(), b.probes.size());
  EXPECT_EQ(a.probes[1].ttft_p99_ms, b.probes[1].ttft_p99_ms);
  EXPECT_FALSE(b.probes[0].ttft_p99_ms.has_value());
  EXPECT_EQ(a.diagnosis.findings.size(), b.diagnosis.findings.size());
}

TEST(SearchRecord, RoundTripsEveryFieldToTheSameDoubles) {
  const ConfigSearch c = searched(3);
  const nlohmann::json j = nlohmann::json::parse(search_record_json(c).dump());
  EXPECT_EQ(j.at("idx"), 3);
  ConfigSearch back;
  back.config_idx = 3;
  read_search_record(j, back);
  expect_same(c, back);
}

// Two ranks as rank 0 sees them: its own text and the other rank's, in rank order.
class TwoRanks final : public RankGroup {
 public:
  explicit TwoRanks(std::string other) : other_(std::move(other)) {}
  int32_t rank() const override { return 0; }
  int32_t size() const override { return 2; }
  std::vector<std::string> gather_to_root(const std::string& text) const override {
    return {text, other_};
  }
  int64_t sum(int64_t v) const override { return v; }
  int64_t max(int64_t v) const override { return v; }

 private:
  std::string other_;
};

TEST(SearchRecord, RankZeroGathersTheOtherRanksConfigurations) {
  // Rank 1 searched configurations 1 and 3; rank 0 holds only its own (0, 2).
  SearchResult full, mine;
  for (int64_t i = 0; i < 4; ++i) {
    full.configs.push_back(searched(i));
    ConfigSearch c;
    c.config_idx = i;
    mine.configs.push_back(i % 2 == 0 ? searched(i) : c);
  }
  nlohmann::json other = nlohmann::json::array();
  for (int64_t i : {1, 3}) other.push_back(search_record_json(full.configs[i]));
  ASSERT_TRUE(gather_search_results(TwoRanks(other.dump()), mine, 5.0));
  for (int64_t i = 0; i < 4; ++i) expect_same(full.configs[i], mine.configs[i]);
  EXPECT_EQ(mine.cheapest, cheapest_config(full.configs, 5.0));
  EXPECT_TRUE(gather_search_results(SingleProcess(), mine, std::nullopt));
}

}  // namespace
}  // namespace moesim::sim::study
