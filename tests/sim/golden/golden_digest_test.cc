// Every shipped scenario (scenarios/**/*.toml) has golden event digests in
// tests/golden/digests.txt, one per tier (run.fidelity "exact" and "fast"), checked here:
// determinism is tested, not promised. A scenario without an entry fails the test, so new
// scenarios must add theirs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "sim/policy/policy_registry.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim {
namespace {

struct Golden {
  double duration_s = 0;
  int64_t seed = 0;
  std::string digest;       // run.fidelity = "exact"
  std::string fast_digest;  // run.fidelity = "fast"
};

std::map<std::string, Golden> read_goldens() {
  std::map<std::string, Golden> out;
  std::ifstream in(std::string(MOESIM_SOURCE_DIR) + "/tests/golden/digests.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string path;
    Golden g;
    ss >> path >> g.duration_s >> g.seed >> g.digest >> g.fast_digest;
    out[path] = g;
  }
  return out;
}

std::vector<std::string> shipped_scenarios() {
  std::vector<std::string> out;
  std::filesystem::path root = std::filesystem::path(MOESIM_SOURCE_DIR) / "scenarios";
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().extension() == ".toml") {
      out.push_back(std::filesystem::relative(e.path(), MOESIM_SOURCE_DIR).string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

class GoldenDigest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenDigest, MatchesAndRepeats) {
  const std::string& rel = GetParam();
  auto goldens = read_goldens();
  auto it = goldens.find(rel);
  ASSERT_NE(it, goldens.end()) << rel << " has no golden digest in tests/golden/digests.txt";
  Scenario sc = load_scenario(std::string(MOESIM_SOURCE_DIR) + "/" + rel);
  sc.run.duration_s = it->second.duration_s;
  RunOutput a = run_scenario(sc, RunOptions{}, it->second.seed, make_policies(sc));
  EXPECT_TRUE(a.conservation_ok) << a.conservation_message;
  EXPECT_EQ(a.digest_hex, it->second.digest) << rel;
  RunOutput b = run_scenario(sc, RunOptions{}, it->second.seed, make_policies(sc));
  EXPECT_EQ(a.digest_hex, b.digest_hex) << rel << ": two runs differ";
}

TEST_P(GoldenDigest, FastTierMatchesAndRepeats) {
  const std::string& rel = GetParam();
  auto goldens = read_goldens();
  auto it = goldens.find(rel);
  ASSERT_NE(it, goldens.end()) << rel << " has no golden digest in tests/golden/digests.txt";
  ASSERT_FALSE(it->second.fast_digest.empty()) << rel << " has no fast-fidelity digest";
  Scenario sc = load_scenario(std::string(MOESIM_SOURCE_DIR) + "/" + rel);
  sc.run.duration_s = it->second.duration_s;
  sc.run.fidelity = Fidelity::kFast;
  RunOutput a = run_scenario(sc, RunOptions{}, it->second.seed, make_policies(sc));
  EXPECT_TRUE(a.conservation_ok) << a.conservation_message;
  EXPECT_EQ(a.digest_hex, it->second.fast_digest) << rel;
  RunOutput b = run_scenario(sc, RunOptions{}, it->second.seed, make_policies(sc));
  EXPECT_EQ(a.digest_hex, b.digest_hex) << rel << ": two fast-fidelity runs differ";
}

INSTANTIATE_TEST_SUITE_P(Shipped, GoldenDigest, ::testing::ValuesIn(shipped_scenarios()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace moesim::sim
