// The horizon corpus (tests/data/bad/horizon/): scenarios whose inputs each pass their reader but
// combine into a duration or an event time beyond the simulation horizon (sim/core/horizon.h,
// issue 19): one per class (a collective, an op, a step, the clock). Every scenario loads, its
// run raises exactly the listed message, and every corpus scenario is listed. Before the checks
// these runs ended with exit 0: TTFT 0.00 ms, every request complete.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "sim/core/horizon.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim {
namespace {

namespace fs = std::filesystem;

const std::string kDir = std::string(MOESIM_SOURCE_DIR) + "/tests/data/bad/horizon";

const std::map<std::string, std::string>& expected_messages() {
  static const std::map<std::string, std::string> kMessages = {
      {"network_beyond_horizon.toml",
       "network: an all-to-all takes 8.654e+14 s, beyond the 100-year horizon (3.156e+09 s): its "
       "bottleneck, link nvlink gpu0->nvswitch0, carries 8.654e+05 bytes at 1e-09 bytes/s; check "
       "the bandwidths and latencies of topology 'nvlink_one_byte_per_s' (and a calibration "
       "profile's network efficiencies)"},
      {"op_beyond_horizon.toml",
       "cost model 'calibrated': attn_mla_prefill (bf16, 6.136e+09 FLOPs, 5.63e+06 bytes, 4000 "
       "tokens) takes 6.136e+09 s, beyond the 100-year horizon (3.156e+09 s): check the "
       "coefficients of calibration profile 'one-second-per-flop' (op kinds it has no fit for: "
       "the peak FLOP/s and HBM bandwidth of GPU 'h200-sxm' ([gpu] in the topology) and "
       "[cost.roofline])"},
      {"step_beyond_horizon.toml",
       "step model: a step of 2000 tokens on 8 GPUs over 4 layers takes 5.364e+09 s, beyond the "
       "100-year horizon (3.156e+09 s): its slowest GPU computes for 5.364e+09 s and spends "
       "2.6e-05 s in all-to-alls; check the topology's bandwidths and the coefficients of "
       "calibration profile 'one-second-per-flop' (op kinds it has no fit for: the peak FLOP/s "
       "and HBM bandwidth of GPU 'h200-sxm' ([gpu] in the topology) and [cost.roofline])"},
      {"clock_beyond_horizon.toml",
       "simulation clock: event 'arrival' at t = 0.1578 s + 3.156e+09 s = 3.156e+09 s passes the "
       "100-year horizon (3.156e+09 s)"},
  };
  return kMessages;
}

std::string run_error(const std::string& path) {
  const Scenario sc = load_scenario(path);  // loads: every input is within its reader's domain
  try {
    run_scenario(sc, RunOptions{});
  } catch (const HorizonError& e) {
    return e.what();
  }
  return "(ran without error)";
}

TEST(HorizonCorpusTest, EveryScenarioFailsWithItsMessage) {
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(kDir)) {
    if (entry.path().extension() != ".toml") continue;
    const std::string file = entry.path().filename().string();
    const std::string actual = run_error(entry.path().string());
    auto it = expected_messages().find(file);
    if (it == expected_messages().end()) {
      ADD_FAILURE() << "unlisted corpus scenario " << file << ": " << actual;
      continue;
    }
    EXPECT_EQ(actual, it->second) << file;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(expected_messages().size()));
}

}  // namespace
}  // namespace moesim::sim
