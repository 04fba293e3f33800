// Shared by the libFuzzer targets: the one rule every reader is held to. Bad input must end in
// the reader's documented error (ConfigError, "clear error, exit 2"; the engine's InputError); any
// other exception is a finding, reported and turned into an abort so that libFuzzer saves the
// input. Crashes, sanitizer reports and hangs are findings by themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <typeinfo>
#include <utility>

#include "sim/config/config_error.h"

namespace moesim::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `read`; returns normally when it succeeds or throws `InputError` (the reader's documented
// bad-input error), aborts otherwise.
template <typename InputError, typename Read>
void expect_clean_or(Read&& read) {
  try {
    read();
  } catch (const InputError&) {
    // The documented bad-input error.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz finding: %s escaped the reader: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz finding: a non-std exception escaped the reader\n");
    std::abort();
  }
}

// The simulator's readers: ConfigError.
template <typename Read>
void expect_clean_or_config_error(Read&& read) {
  expect_clean_or<sim::ConfigError>(std::forward<Read>(read));
}

}  // namespace moesim::fuzz
