// Wording shared by the JSON Lines trace readers (Mooncake traces, request traces): a value's
// type as messages name it, and a parse error's reason without nlohmann's position prefix.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace moesim::sim {

// "integer", "number", or nlohmann's type name ("string", "array", ...).
inline std::string json_type_name(const nlohmann::json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}

// The parser's message without its "[json.exception...] parse error at line 1, column N: " lead.
inline std::string json_parse_reason(const nlohmann::json::parse_error& e) {
  std::string what = e.what();
  const size_t column = what.find("column ");
  if (column != std::string::npos) {
    const size_t colon = what.find(": ", column);
    if (colon != std::string::npos) return what.substr(colon + 2);
  }
  return what;
}

}  // namespace moesim::sim
