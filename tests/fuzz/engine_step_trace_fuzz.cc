// Fuzzes the engine's own step-trace reader (engine/step_trace.h): the one `moesim-engine replay`
// runs before it allocates buffers, with its shape limits and the schema's invariants. Its
// documented bad-input error is engine::InputError ("FILE:LINE: FIELD: reason").
#include "engine/input_error.h"
#include "engine/step_trace.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moesim::fuzz::expect_clean_or<moesim::engine::InputError>(
      [&] { moesim::engine::parse_step_trace(moesim::fuzz::as_text(data, size), "fuzz.jsonl"); });
  return 0;
}
