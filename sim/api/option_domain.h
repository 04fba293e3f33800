// The documented domain of a request's options, checked the same way by every command of the API
// (the command line and the Python module fill the same requests): a value outside its domain is
// a UsageError naming the option as the command line spells it, its domain and the value, e.g.
// "--prefill must be in [0, 159744] (tokens: --context + --prefill <= the model's
// max_context_tokens 163840), got 33554432". Nothing is clamped, and NaN is never inside a
// domain.
#pragma once

#include <cstdint>
#include <string>

namespace moesim::sim::api {

// Throws UsageError unless lo <= value <= hi. `why` (optional) says where the bounds come from.
void check_option_in(const std::string& option, int64_t value, int64_t lo, int64_t hi,
                     const std::string& why = "");
// Throws UsageError unless lo <= value <= hi (so never for NaN).
void check_option_in(const std::string& option, double value, double lo, double hi,
                     const std::string& why = "");

}  // namespace moesim::sim::api
