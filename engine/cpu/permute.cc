// Permutation by expert, its inverse, and the weighted combine.
#include <cstring>

#include "base/check.h"
#include "engine/cpu/host_matrix.h"
#include "engine/cpu/reference.h"

namespace moesim::engine::cpu {

void permute(const Tensor& x, const Tensor& gather_rows, const Tensor& out) {
  MOESIM_CHECK(gather_rows.dtype == DType::kI32, "permute: gather_rows must be I32");
  MOESIM_CHECK(x.dtype == out.dtype && x.cols() == out.cols(), "permute: x/out layout");
  MOESIM_CHECK(out.rows() == gather_rows.num_elements(), "permute: out rows");
  const int64_t row_bytes = x.cols() * dtype_size_bytes(x.dtype);
  const int32_t* rows = static_cast<const int32_t*>(gather_rows.data);
  const char* src = static_cast<const char*>(x.data);
  char* dst = static_cast<char*>(out.data);
  for (int64_t i = 0; i < out.rows(); ++i) {
    MOESIM_CHECK(rows[i] >= 0 && rows[i] < x.rows(), "permute: row index out of range");
    std::memcpy(dst + i * row_bytes, src + rows[i] * row_bytes, row_bytes);
  }
}

void unpermute(const Tensor& x, const Tensor& scatter_rows, const Tensor& out) {
  MOESIM_CHECK(scatter_rows.dtype == DType::kI32, "unpermute: scatter_rows must be I32");
  MOESIM_CHECK(x.shape == out.shape && x.dtype == out.dtype, "unpermute: x/out layout");
  MOESIM_CHECK(x.rows() == scatter_rows.num_elements(), "unpermute: index count");
  const int64_t row_bytes = x.cols() * dtype_size_bytes(x.dtype);
  const int32_t* rows = static_cast<const int32_t*>(scatter_rows.data);
  const char* src = static_cast<const char*>(x.data);
  char* dst = static_cast<char*>(out.data);
  for (int64_t i = 0; i < x.rows(); ++i) {
    MOESIM_CHECK(rows[i] >= 0 && rows[i] < out.rows(), "unpermute: index out of range");
    std::memcpy(dst + rows[i] * row_bytes, src + i * row_bytes, row_bytes);
  }
}

void weighted_combine(const Tensor& expert_out, const Tensor& weights, const Tensor& shared_out,
                      const Tensor& out) {
  const int64_t num_tokens = out.rows();
  const int64_t hidden = out.cols();
  MOESIM_CHECK(weights.dtype == DType::kF32 && weights.rows() == num_tokens,
               "combine: weights shape");
  const int64_t top_k = weights.cols();
  MOESIM_CHECK(expert_out.num_elements() == num_tokens * top_k * hidden,
               "combine: expert_out shape");
  const MatF slots = load_matrix(expert_out);  // [T * top_k, H]
  const float* wp = static_cast<const float*>(weights.data);
  MatF acc = shared_out.empty() ? MatF::Zero(num_tokens, hidden) : load_matrix(shared_out);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t j = 0; j < top_k; ++j) acc.row(t) += wp[t * top_k + j] * slots.row(t * top_k + j);
  }
  store_matrix(acc, out);
}

}  // namespace moesim::engine::cpu
