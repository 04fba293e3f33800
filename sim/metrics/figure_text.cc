#include "sim/metrics/figure_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace moesim::sim {

double clean_double(double v) {
  if (!std::isfinite(v) || v == 0) return v;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return std::strtod(buf, nullptr);
}

std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), clean_double(v));
  return std::string(buf, res.ptr);
}

std::string count_text(double v) {
  if (!std::isfinite(v)) return number_text(v);
  if (std::fabs(v) >= 9.2e18) return number_text(std::round(v));
  return std::to_string(std::llround(v));
}

std::string bytes_text(double bytes) {
  if (!std::isfinite(bytes)) return number_text(bytes);
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = bytes;
  int unit = 0;
  // Switch unit at 1000 (not 1024) of the smaller one, so that 3 significant digits never need
  // a fourth ("1000 MiB"): 1000 MiB reads "0.977 GiB".
  while (std::fabs(v) >= 999.5 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  char buf[48];
  if (unit == 0) {
    std::snprintf(buf, sizeof(buf), "%.0f B", v);
  } else {
    double a = std::fabs(v);
    int decimals = a < 0.9995 ? 3 : a < 9.995 ? 2 : a < 99.95 ? 1 : 0;
    std::snprintf(buf, sizeof(buf), "%.*f %s", decimals, v, kUnits[unit]);
  }
  return buf;
}

bool is_bytes_name(std::string_view name) {
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find_first_of("_.", start);
    if (end == std::string_view::npos) end = name.size();
    if (name.substr(start, end - start) == "bytes") return true;
    start = end + 1;
  }
  return false;
}

}  // namespace moesim::sim
