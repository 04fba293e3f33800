// A request the API refuses before any work: a value out of range, a missing or contradictory
// option. The message names the option as the command line spells it ("--seed must be >= 0"),
// since the Python module's keywords and the command line's options are the same names; the
// command line prints it with its usage hint and exits 2, Python raises moesim.UsageError.
#pragma once

#include <string>

namespace moesim::sim::api {

struct UsageError {
  std::string message;
};

}  // namespace moesim::sim::api
