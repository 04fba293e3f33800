// CSV cells of the study outputs (RFC 4180 quoting): a cell holding a comma, a quote or a line
// break is quoted, with quotes doubled.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moesim::sim::study {

// The cells joined by commas, quoted where needed; no line terminator.
std::string csv_line(const std::vector<std::string>& cells);
// Splits one line (no line terminator) into unquoted cells. Returns false for an unterminated
// quote.
bool split_csv_line(std::string_view line, std::vector<std::string>& cells);

}  // namespace moesim::sim::study
