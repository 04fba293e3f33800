#include "sim/routing/count_matrix.h"

namespace moesim::sim {

int64_t CountMatrix::row_sum(int32_t row_idx) const {
  int64_t sum = 0;
  for (int32_t v : row(row_idx)) sum += v;
  return sum;
}

int64_t CountMatrix::total() const {
  int64_t sum = 0;
  for (int32_t v : values_) sum += v;
  return sum;
}

void CountMatrix::col_sums(std::span<int64_t> out) const {
  MOESIM_CHECK(out.size() == static_cast<size_t>(num_cols_), "col_sums needs num_cols outputs");
  for (auto& v : out) v = 0;
  for (int32_t r = 0; r < num_rows_; ++r) {
    const std::span<const int32_t> cells = row(r);
    for (int32_t c = 0; c < num_cols_; ++c) out[c] += cells[c];
  }
}

}  // namespace moesim::sim
