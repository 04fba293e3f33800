// Errors in the engine's inputs (step traces, command-line values, replay profiles). The message
// names the file, the line and the field. moesim-engine prints it on one line and exits with 2.
#pragma once

#include <stdexcept>
#include <string>

namespace moesim::engine {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace moesim::engine
