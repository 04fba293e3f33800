// Fuzzes the HuggingFace config.json reader (sim/model/hf_config.h).
#include <string_view>

#include "sim/model/hf_config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moesim::fuzz::expect_clean_or_config_error(
      [&] { moesim::sim::parse_hf_config(moesim::fuzz::as_text(data, size), "fuzz.config.json"); });
  return 0;
}
