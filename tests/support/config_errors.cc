#include "tests/support/config_errors.h"

#include "sim/config/config_error.h"

namespace moesim::sim::testing {

std::string config_error_of(const std::function<void()>& f, const std::string& if_none) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return if_none;
}

std::string config_error_key_and_reason_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.key_path() + ": " + e.reason();
  }
  return "";
}

}  // namespace moesim::sim::testing
