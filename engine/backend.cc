// Backend error types, attention-batch offsets and host helpers (the registry is in
// backend_registry.cc, built into a separate library so the CUDA backend can link this one).
#include "engine/backend.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "base/check.h"

namespace moesim::engine {

OutOfMemoryError::OutOfMemoryError(const std::string& what_for, int64_t requested_bytes,
                                   int64_t available_bytes)
    : std::runtime_error("out of device memory for " + what_for + ": requested " +
                         std::to_string(requested_bytes) + " bytes, available " +
                         std::to_string(available_bytes) + " bytes"),
      requested_bytes_(requested_bytes),
      available_bytes_(available_bytes) {}

int64_t AttentionBatch::total_new_tokens() const {
  return std::accumulate(new_tokens.begin(), new_tokens.end(), int64_t{0});
}

int64_t AttentionBatch::total_cache_rows() const {
  return std::accumulate(new_tokens.begin(), new_tokens.end(), int64_t{0}) +
         std::accumulate(context_tokens.begin(), context_tokens.end(), int64_t{0});
}

int64_t AttentionBatch::cache_row_offset(int64_t s) const {
  int64_t offset = 0;
  for (int64_t r = 0; r < s; ++r) offset += context_tokens[r] + new_tokens[r];
  return offset;
}

int64_t AttentionBatch::token_row_offset(int64_t s) const {
  int64_t offset = 0;
  for (int64_t r = 0; r < s; ++r) offset += new_tokens[r];
  return offset;
}

DeviceTensor upload_floats(Backend& backend, const std::vector<float>& values, DType dtype,
                           const Shape& shape, std::string_view what_for) {
  MOESIM_CHECK(static_cast<int64_t>(values.size()) == shape_num_elements(shape),
               "upload_floats: value count does not match the shape");
  DeviceTensor t = backend.allocate(dtype, shape, what_for);
  switch (dtype) {
    case DType::kF32:
      backend.upload(values.data(), t.view);
      break;
    case DType::kBF16: {
      std::vector<uint16_t> bits(values.size());
      for (size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]);
      backend.upload(bits.data(), t.view);
      break;
    }
    case DType::kFP8E4M3: {
      std::vector<uint8_t> bits(values.size());
      for (size_t i = 0; i < values.size(); ++i) bits[i] = float_to_fp8e4m3(values[i]);
      backend.upload(bits.data(), t.view);
      break;
    }
    case DType::kI32:
      MOESIM_CHECK(false, "upload_floats: I32 is not a float dtype");
  }
  return t;
}

DeviceTensor upload_ints(Backend& backend, const std::vector<int32_t>& values, const Shape& shape,
                         std::string_view what_for) {
  MOESIM_CHECK(static_cast<int64_t>(values.size()) == shape_num_elements(shape),
               "upload_ints: value count does not match the shape");
  DeviceTensor t = backend.allocate(DType::kI32, shape, what_for);
  backend.upload(values.data(), t.view);
  return t;
}

std::vector<float> download_floats(Backend& backend, const Tensor& src) {
  const int64_t n = src.num_elements();
  std::vector<float> out(n);
  switch (src.dtype) {
    case DType::kF32:
      backend.download(src, out.data());
      break;
    case DType::kBF16: {
      std::vector<uint16_t> bits(n);
      backend.download(src, bits.data());
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(bits[i]);
      break;
    }
    case DType::kFP8E4M3: {
      std::vector<uint8_t> bits(n);
      backend.download(src, bits.data());
      for (int64_t i = 0; i < n; ++i) out[i] = fp8e4m3_to_float(bits[i]);
      break;
    }
    case DType::kI32:
      MOESIM_CHECK(false, "download_floats: I32 is not a float dtype");
  }
  return out;
}

std::vector<int32_t> download_ints(Backend& backend, const Tensor& src) {
  MOESIM_CHECK(src.dtype == DType::kI32, "download_ints: tensor is not I32");
  std::vector<int32_t> out(src.num_elements());
  backend.download(src, out.data());
  return out;
}

}  // namespace moesim::engine
