// Fuzzes the engine's own step-trace reader (engine/step_trace.h): the one `moesim-engine replay`
// runs before it allocates buffers, with its shape limits and the schema's invariants. Its
// documented bad-input error is engine::InputError ("FILE:LINE: FIELD: reason").
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "engine/input_error.h"
#include "engine/step_trace.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    moesim::engine::parse_step_trace(moesim::fuzz::as_text(data, size), "fuzz.jsonl");
  } catch (const moesim::engine::InputError&) {
    // The documented bad-input error.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz finding: %s escaped the reader: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz finding: a non-std exception escaped the reader\n");
    std::abort();
  }
  return 0;
}
