// Test helpers for user-input errors: run a callable and return the message of the ConfigError
// it throws, so that a test compares messages with EXPECT_EQ and a missing error shows up as
// the no-error text in the failure rather than as a bare EXPECT_THROW.
#pragma once

#include <functional>
#include <string>

namespace moesim::sim::testing {

// ConfigError::what() ("FILE[:LINE[:COL]]: KEY.PATH: REASON") of the ConfigError that `f`
// throws, or `if_none` when `f` returns normally. Other exceptions propagate.
std::string config_error_of(const std::function<void()>& f, const std::string& if_none = "");

// "KEY.PATH: REASON" of the ConfigError that `f` throws (without file and position), or "" when
// `f` returns normally. Other exceptions propagate.
std::string config_error_key_and_reason_of(const std::function<void()>& f);

}  // namespace moesim::sim::testing
