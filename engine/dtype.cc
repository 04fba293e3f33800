#include "engine/dtype.h"

namespace moesim::engine {

int64_t dtype_size_bytes(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kFP8E4M3:
      return 1;
    case DType::kI32:
      return 4;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "fp32";
    case DType::kBF16:
      return "bf16";
    case DType::kFP8E4M3:
      return "fp8";
    case DType::kI32:
      return "i32";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kFP8E4M3, DType::kI32}) {
    if (dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

}  // namespace moesim::engine
