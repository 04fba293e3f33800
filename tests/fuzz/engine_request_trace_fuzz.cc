// Fuzzes the engine's request-trace reader (engine/serve/request_trace.h): the one
// `moesim-engine serve` runs before it builds anything. Its documented bad-input error is
// engine::InputError ("FILE:LINE: FIELD: reason").
#include "engine/input_error.h"
#include "engine/serve/request_trace.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moesim::fuzz::expect_clean_or<moesim::engine::InputError>([&] {
    moesim::engine::serve::parse_request_trace(moesim::fuzz::as_text(data, size), "fuzz.jsonl");
  });
  return 0;
}
