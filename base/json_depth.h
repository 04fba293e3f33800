// JSON with a nesting limit: every reader of the project's JSON and JSONL inputs parses through
// parse_json(), which refuses objects and arrays nested more than kMaxJsonDepth deep with
// JsonDepthError before any recursive walk of the value (dumping it into an error message,
// describing it) could exhaust the stack (docs/reliability.md). Header-only, nlohmann only: shared
// by sim/ and engine/.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>

namespace moesim {

// The deepest nesting of objects and arrays any input of the project needs is 4 (a step trace's
// routing rows); 64 leaves room and stays far from any stack limit.
inline constexpr int kMaxJsonDepth = 64;

class JsonDepthError : public std::runtime_error {
 public:
  JsonDepthError()
      : std::runtime_error("objects and arrays nested more than " + std::to_string(kMaxJsonDepth) +
                           " deep") {}
};

// nlohmann::json::parse(input, allow_exceptions) that throws JsonDepthError for nesting deeper
// than kMaxJsonDepth (whatever allow_exceptions says: a too-deep document is never returned).
template <typename Input>
nlohmann::json parse_json(Input&& input, bool allow_exceptions = true) {
  const nlohmann::json::parser_callback_t limit = [](int depth, nlohmann::json::parse_event_t event,
                                                     nlohmann::json&) {
    // A container that starts at depth d is nested d + 1 deep.
    if (depth >= kMaxJsonDepth && (event == nlohmann::json::parse_event_t::object_start ||
                                   event == nlohmann::json::parse_event_t::array_start)) {
      throw JsonDepthError();
    }
    return true;
  };
  return nlohmann::json::parse(std::forward<Input>(input), limit, allow_exceptions);
}

}  // namespace moesim
