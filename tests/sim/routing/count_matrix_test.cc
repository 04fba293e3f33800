#include "sim/routing/count_matrix.h"

#include <gtest/gtest.h>

namespace moesim::sim {
namespace {

TEST(CountMatrix, SumsAndResetReusesStorage) {
  CountMatrix m(2, 3);
  m.at(0, 0) = 1;
  m.at(0, 2) = 2;
  m.at(1, 1) = 5;
  EXPECT_EQ(m.row_sum(0), 3);
  EXPECT_EQ(m.total(), 8);
  std::vector<int64_t> cols(3);
  m.col_sums(cols);
  EXPECT_EQ(cols, (std::vector<int64_t>{1, 5, 2}));
  const int32_t* data = m.values().data();
  m.reset(3, 2);  // same number of cells: no reallocation, zeroed
  EXPECT_EQ(m.values().data(), data);
  EXPECT_EQ(m.total(), 0);
  EXPECT_EQ(m.num_rows(), 3);
}

}  // namespace
}  // namespace moesim::sim
