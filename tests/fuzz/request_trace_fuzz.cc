// Fuzzes the simulator's request-trace reader (sim/workload/request_trace_reader.h), the one a
// `[workload] kind = "request_trace"` scenario and `moesim validate --serving` read.
#include <sstream>
#include <string>

#include "sim/workload/request_trace_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moesim::fuzz::expect_clean_or_config_error([&] {
    std::istringstream in{std::string(moesim::fuzz::as_text(data, size))};
    moesim::sim::read_request_trace(in, "fuzz.jsonl");
  });
  return 0;
}
