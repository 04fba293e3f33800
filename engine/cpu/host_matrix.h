// Internal to engine/cpu: moving host Tensors in and out of FP32 Eigen matrices.
#pragma once

#include <Eigen/Core>
#include <cstdint>

#include "engine/tensor.h"

namespace moesim::engine::cpu {

using MatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using VecF = Eigen::VectorXf;

// The tensor as a rows() x cols() FP32 matrix (converted from its float dtype).
MatF load_matrix(const Tensor& t);
// Rows [row_begin, row_begin + num_rows) of the tensor viewed as rows() x cols().
MatF load_rows(const Tensor& t, int64_t row_begin, int64_t num_rows);
// Matrix `expert_idx` of a [E, rows, cols] tensor.
MatF load_slice(const Tensor& t, int64_t slice_idx);
// All elements as a vector.
VecF load_vector(const Tensor& t);
// Writes m (rows() x cols() of t) rounded to t's dtype.
void store_matrix(const MatF& m, const Tensor& t);
// Writes m into rows [row_begin, row_begin + m.rows()) of t.
void store_rows(const MatF& m, const Tensor& t, int64_t row_begin);
// Element i of a float-dtype tensor as FP32.
float load_element(const Tensor& t, int64_t i);
// Writes element i rounded to the tensor's dtype.
void store_element(const Tensor& t, int64_t i, float value);
// Rounds every element of m through `dtype` in place (FP32: unchanged).
void round_through(MatF& m, DType dtype);

}  // namespace moesim::engine::cpu
