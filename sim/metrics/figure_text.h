// How figures are written in the outputs: one set of rules for the run summary (text and JSON),
// the sweep CSV and the study tables. Doubles keep at most 15 significant digits (every such
// decimal survives the round trip through a double) in the shortest text that reads back, which
// drops the noise of the last bit of arithmetic and nothing else; byte and token counts are
// integers; a figure without samples is "n/a" in text, null in JSON and an empty CSV cell, the
// callers deciding which figures have data (run_metrics.h). docs/outputs.md, "Numbers and
// missing data".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace moesim::sim {

// The double nearest to v's decimal form with 15 significant digits. NaN and infinities are
// returned unchanged.
double clean_double(double v);

// clean_double(v) in the shortest text that reads back to it (std::to_chars: "0.07622", "2",
// "1.5e-07"); "nan", "inf" or "-inf" for non-finite values.
std::string number_text(double v);

// v rounded to the nearest integer, in decimal ("10217300000"): for byte and token counts.
std::string count_text(double v);

// Bytes for people, 3 significant digits in binary units: "812 B", "4.00 KiB", "512 MiB",
// "9.52 GiB", "1.25 TiB".
std::string bytes_text(double bytes);

// True when a figure named `name` (a policy metric, a counter) is a byte count by the naming
// convention of STYLE.md: one of its words (separated by '_' or '.') is "bytes".
bool is_bytes_name(std::string_view name);

}  // namespace moesim::sim
