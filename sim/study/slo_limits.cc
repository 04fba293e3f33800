#include "sim/study/slo_limits.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "base/number_text.h"
#include "sim/config/config_error.h"
#include "sim/metrics/figure_text.h"

namespace moesim::sim::study {
namespace {

const std::vector<std::string>& percentile_limit_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const char* metric : {"ttft", "tpot", "e2e", "queueing"}) {
      for (const char* p : {"p50", "p90", "p99"}) {
        names.push_back(std::string(metric) + "_" + p + "_ms");
      }
    }
    return names;
  }();
  return kNames;
}

}  // namespace

std::string slo_limits_text(const SearchSlo& slo) {
  std::string out;
  auto add = [&](const std::string& item) { out += (out.empty() ? "" : ", ") + item; };
  for (const SearchSlo::Limit& l : slo.percentile_limits)
    add(l.name + "<=" + number_text(l.limit_ms));
  if (slo.request_ttft_ms) add("ttft_ms<=" + number_text(*slo.request_ttft_ms));
  if (slo.request_tpot_ms) add("tpot_ms<=" + number_text(*slo.request_tpot_ms));
  add("attainment>=" + number_text(slo.min_attainment));
  return out;
}

SearchSlo parse_search_slo(const std::string& text) {
  SearchSlo slo;
  auto bad = [&](const std::string& item, const std::string& why) -> ConfigError {
    return ConfigError("--slo", 0, 0, item, why);
  };
  std::string valid = "ttft_ms, tpot_ms, attainment";
  for (const std::string& n : percentile_limit_names()) valid += ", " + n;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) throw bad("", "empty item in '" + text + "' (want NAME=VALUE,...)");
    size_t eq = item.find('=');
    if (eq == std::string::npos) throw bad(item, "want NAME=VALUE");
    std::string name = item.substr(0, eq), value_text = item.substr(eq + 1);
    std::string reason;  // base/number_text.h: the one parse of typed numbers
    const std::optional<double> parsed = parse_number_text(value_text, &reason);
    if (!parsed) throw bad(name, "not a number: '" + value_text + "'");
    const double value = *parsed;
    if (name == "attainment") {
      if (value < 0 || value > 1) throw bad(name, "must be in [0, 1]");
      slo.min_attainment = value;
      continue;
    }
    if (value <= 0) throw bad(name, "must be > 0");
    if (name == "ttft_ms") {
      slo.request_ttft_ms = value;
    } else if (name == "tpot_ms") {
      slo.request_tpot_ms = value;
    } else if (std::find(percentile_limit_names().begin(), percentile_limit_names().end(), name) !=
               percentile_limit_names().end()) {
      for (const SearchSlo::Limit& l : slo.percentile_limits) {
        if (l.name == name) throw bad(name, "given twice");
      }
      slo.percentile_limits.push_back({name, value});
    } else {
      throw bad(name, "unknown limit (valid: " + valid + ")");
    }
  }
  return slo;
}

}  // namespace moesim::sim::study
