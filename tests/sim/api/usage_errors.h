// Shared by the API tests: the UsageError a call throws, as its message ("" when none).
#pragma once

#include <string>

#include "sim/api/usage_error.h"

namespace moesim::sim::api::testing {

template <typename F>
std::string usage_error_of(F fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.message;
  }
  return "";
}

}  // namespace moesim::sim::api::testing
