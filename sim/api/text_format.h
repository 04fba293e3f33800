// printf-style formatting into std::string, for the text writers of sim/api: their tables keep
// the exact bytes of the command line's printf output.
#pragma once

#include <string>

namespace moesim::sim::api {

// The text vsnprintf writes for `format` and the arguments.
std::string format_text(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace moesim::sim::api
