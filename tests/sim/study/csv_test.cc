#include "sim/study/csv.h"

#include <gtest/gtest.h>

namespace moesim::sim::study {
namespace {

TEST(Csv, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(csv_line({"a", "b c", ""}), "a,b c,");
  EXPECT_EQ(csv_line({"x,y", "say \"hi\""}), "\"x,y\",\"say \"\"hi\"\"\"");
}

TEST(Csv, SplitInvertsJoin) {
  std::vector<std::string> cells = {"1", "x,y", "say \"hi\"", "", "a=1;b=2"};
  std::vector<std::string> back;
  ASSERT_TRUE(split_csv_line(csv_line(cells), back));
  EXPECT_EQ(back, cells);
  EXPECT_FALSE(split_csv_line("a,\"open", back));
}

}  // namespace
}  // namespace moesim::sim::study
