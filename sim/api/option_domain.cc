#include "sim/api/option_domain.h"

#include "sim/api/text_format.h"
#include "sim/api/usage_error.h"

namespace moesim::sim::api {
namespace {

[[noreturn]] void refuse(const std::string& option, const std::string& domain,
                         const std::string& why, const std::string& value) {
  throw UsageError{option + " must be in " + domain + (why.empty() ? "" : " (" + why + ")") +
                   ", got " + value};
}

}  // namespace

void check_option_in(const std::string& option, int64_t value, int64_t lo, int64_t hi,
                     const std::string& why) {
  if (value >= lo && value <= hi) return;
  refuse(option, "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]", why,
         std::to_string(value));
}

void check_option_in(const std::string& option, double value, double lo, double hi,
                     const std::string& why) {
  if (value >= lo && value <= hi) return;
  refuse(option, format_text("[%.10g, %.10g]", lo, hi), why, format_text("%.10g", value));
}

}  // namespace moesim::sim::api
