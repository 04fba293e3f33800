// Fuzzes the scenario TOML reader (sim/scenario/scenario.h); relative model and topology paths
// resolve against scenarios/, so the shipped ones load.
#include <sstream>
#include <string>

#include "sim/scenario/scenario.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moesim::fuzz::expect_clean_or_config_error([&] {
    moesim::sim::parse_scenario_text(moesim::fuzz::as_text(data, size), "fuzz.toml",
                                     MOESIM_SOURCE_DIR "/scenarios");
  });
  return 0;
}
