// A dense row-major matrix of non-negative int32 counts, used for routing selections per
// (source GPU, expert) and per (source GPU, destination GPU).
//
// reset() reuses the existing allocation when it is large enough, so a CountMatrix kept across
// calls makes the routing hot path allocation-free after the first call of the largest shape.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/check.h"

namespace moesim::sim {

class CountMatrix {
 public:
  CountMatrix() = default;
  CountMatrix(int32_t num_rows, int32_t num_cols) { reset(num_rows, num_cols); }

  // Resizes to num_rows x num_cols (both >= 0) and zeroes every cell.
  void reset(int32_t num_rows, int32_t num_cols) {
    MOESIM_CHECK(num_rows >= 0 && num_cols >= 0, "CountMatrix shape must be non-negative");
    num_rows_ = num_rows;
    num_cols_ = num_cols;
    values_.assign(static_cast<size_t>(num_rows) * static_cast<size_t>(num_cols), 0);
  }

  int32_t num_rows() const { return num_rows_; }
  int32_t num_cols() const { return num_cols_; }

  int32_t at(int32_t row_idx, int32_t col_idx) const { return values_[index(row_idx, col_idx)]; }
  int32_t& at(int32_t row_idx, int32_t col_idx) { return values_[index(row_idx, col_idx)]; }

  std::span<const int32_t> row(int32_t row_idx) const {
    return {values_.data() + static_cast<size_t>(row_idx) * num_cols_,
            static_cast<size_t>(num_cols_)};
  }
  std::span<int32_t> row(int32_t row_idx) {
    return {values_.data() + static_cast<size_t>(row_idx) * num_cols_,
            static_cast<size_t>(num_cols_)};
  }
  // All cells, row-major.
  std::span<const int32_t> values() const { return values_; }

  // Sum of one row / of every cell (int64: totals may exceed int32).
  int64_t row_sum(int32_t row_idx) const;
  int64_t total() const;
  // Writes the per-column sums into out (size num_cols()).
  void col_sums(std::span<int64_t> out) const;

  bool operator==(const CountMatrix& other) const = default;

 private:
  size_t index(int32_t row_idx, int32_t col_idx) const {
    return static_cast<size_t>(row_idx) * static_cast<size_t>(num_cols_) +
           static_cast<size_t>(col_idx);
  }

  int32_t num_rows_ = 0;
  int32_t num_cols_ = 0;
  std::vector<int32_t> values_;
};

}  // namespace moesim::sim
