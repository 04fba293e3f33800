#include "sim/workload/request.h"

namespace moesim::sim {

std::string_view domain_name(Domain domain) {
  switch (domain) {
    case Domain::kCode:
      return "code";
    case Domain::kMath:
      return "math";
    case Domain::kChat:
      return "chat";
    case Domain::kMultilingual:
      return "multilingual";
  }
  return "?";
}

LengthClass length_class(int64_t prompt_tokens) {
  if (prompt_tokens >= kLongPromptTokens) return LengthClass::kLong;
  if (prompt_tokens >= kMediumPromptTokens) return LengthClass::kMedium;
  return LengthClass::kShort;
}

std::string_view length_class_name(LengthClass length_class) {
  switch (length_class) {
    case LengthClass::kShort:
      return "short";
    case LengthClass::kMedium:
      return "medium";
    case LengthClass::kLong:
      return "long";
  }
  return "?";
}

}  // namespace moesim::sim
