// Fuzzes the Azure CSV trace reader (sim/workload/azure_trace.h).
#include <sstream>
#include <string>

#include "sim/workload/azure_trace.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moesim::fuzz::expect_clean_or_config_error([&] {
    std::istringstream in{std::string(moesim::fuzz::as_text(data, size))};
    moesim::sim::read_azure_trace(in, "fuzz.csv");
  });
  return 0;
}
