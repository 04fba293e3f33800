// Shared by the libFuzzer targets: the one rule every reader is held to. Bad input must end in
// ConfigError (the documented "clear error, exit 2"); any other exception is a finding, reported
// and turned into an abort so that libFuzzer saves the input. Crashes, sanitizer reports and
// hangs are findings by themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <typeinfo>

#include "sim/config/config_error.h"

namespace moesim::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `read`; returns normally when it succeeds or throws ConfigError, aborts otherwise.
template <typename Read>
void expect_clean_or_config_error(Read&& read) {
  try {
    read();
  } catch (const sim::ConfigError&) {
    // The documented bad-input error.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz finding: %s escaped the reader: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz finding: a non-std exception escaped the reader\n");
    std::abort();
  }
}

}  // namespace moesim::fuzz
