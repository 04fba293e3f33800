#include "engine/cpu/host_matrix.h"

#include "base/check.h"

namespace moesim::engine::cpu {

float load_element(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32:
      return static_cast<const float*>(t.data)[i];
    case DType::kBF16:
      return bf16_to_float(static_cast<const uint16_t*>(t.data)[i]);
    case DType::kFP8E4M3:
      return fp8e4m3_to_float(static_cast<const uint8_t*>(t.data)[i]);
    case DType::kI32:
      break;
  }
  MOESIM_CHECK(false, "load_element: not a float tensor");
  return 0.0f;
}

void store_element(const Tensor& t, int64_t i, float value) {
  switch (t.dtype) {
    case DType::kF32:
      static_cast<float*>(t.data)[i] = value;
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(t.data)[i] = float_to_bf16(value);
      return;
    case DType::kFP8E4M3:
      static_cast<uint8_t*>(t.data)[i] = float_to_fp8e4m3(value);
      return;
    case DType::kI32:
      break;
  }
  MOESIM_CHECK(false, "store_element: not a float tensor");
}

namespace {

void load_range(const Tensor& t, int64_t begin, int64_t count, float* dst) {
  MOESIM_CHECK(t.data != nullptr, "load from an empty tensor");
  switch (t.dtype) {
    case DType::kF32: {
      const float* src = static_cast<const float*>(t.data) + begin;
      std::copy(src, src + count, dst);
      return;
    }
    case DType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(t.data) + begin;
      for (int64_t i = 0; i < count; ++i) dst[i] = bf16_to_float(src[i]);
      return;
    }
    case DType::kFP8E4M3: {
      const uint8_t* src = static_cast<const uint8_t*>(t.data) + begin;
      for (int64_t i = 0; i < count; ++i) dst[i] = fp8e4m3_to_float(src[i]);
      return;
    }
    case DType::kI32:
      break;
  }
  MOESIM_CHECK(false, "load: not a float tensor");
}

void store_range(const float* src, int64_t count, const Tensor& t, int64_t begin) {
  for (int64_t i = 0; i < count; ++i) store_element(t, begin + i, src[i]);
}

}  // namespace

MatF load_matrix(const Tensor& t) { return load_rows(t, 0, t.rows()); }

MatF load_rows(const Tensor& t, int64_t row_begin, int64_t num_rows) {
  MOESIM_CHECK(row_begin >= 0 && row_begin + num_rows <= t.rows(), "row range");
  MatF m(num_rows, t.cols());
  load_range(t, row_begin * t.cols(), num_rows * t.cols(), m.data());
  return m;
}

MatF load_slice(const Tensor& t, int64_t slice_idx) {
  MOESIM_CHECK(t.shape.size() == 3, "load_slice needs a 3-d tensor");
  const int64_t rows = t.shape[1];
  const int64_t cols = t.shape[2];
  MatF m(rows, cols);
  load_range(t, slice_idx * rows * cols, rows * cols, m.data());
  return m;
}

VecF load_vector(const Tensor& t) {
  VecF v(t.num_elements());
  load_range(t, 0, t.num_elements(), v.data());
  return v;
}

void store_matrix(const MatF& m, const Tensor& t) {
  MOESIM_CHECK(m.rows() == t.rows() && m.cols() == t.cols(), "store_matrix shape");
  store_range(m.data(), m.size(), t, 0);
}

void store_rows(const MatF& m, const Tensor& t, int64_t row_begin) {
  MOESIM_CHECK(m.cols() == t.cols() && row_begin + m.rows() <= t.rows(), "store_rows");
  store_range(m.data(), m.size(), t, row_begin * t.cols());
}

void round_through(MatF& m, DType dtype) {
  if (dtype == DType::kBF16) {
    for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = round_bf16(m.data()[i]);
  } else if (dtype == DType::kFP8E4M3) {
    for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = round_fp8e4m3(m.data()[i]);
  }
}

}  // namespace moesim::engine::cpu
