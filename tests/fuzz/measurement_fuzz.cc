// Fuzzes the measurement reader (sim/calibration/measurement_reader.h).
#include <sstream>
#include <string>

#include "sim/calibration/measurement_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moesim::fuzz::expect_clean_or_config_error([&] {
    std::istringstream in{std::string(moesim::fuzz::as_text(data, size))};
    moesim::sim::read_measurements(in, "fuzz.jsonl");
  });
  return 0;
}
