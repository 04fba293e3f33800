#include "sim/study/sweep_merge.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/support/config_errors.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::study {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  return scratch::write(name, text);
}

std::string merge_error(const std::vector<std::string>& paths) {
  std::ostringstream out;
  const std::string error = testing::config_error_of([&] { merge_sweep_csvs(paths, out); });
  if (!error.empty()) {
    EXPECT_EQ(out.str(), "");  // nothing written on error
  }
  return error;
}

const std::string kHeader = "run_idx,num_runs,config_idx,seed,x,status\n";

TEST(SweepMerge, RestoresGridOrder) {
  std::string a = write_temp("m_a.csv", kHeader + "1,4,0,2,\"a,b\",ok\n3,4,1,2,c,ok\n");
  std::string b = write_temp("m_b.csv", kHeader + "0,4,0,1,\"a,b\",ok\n2,4,1,1,c,ok\n");
  std::ostringstream out;
  merge_sweep_csvs({a, b}, out);
  EXPECT_EQ(out.str(), kHeader +
                           "0,4,0,1,\"a,b\",ok\n1,4,0,2,\"a,b\",ok\n2,4,1,1,c,ok\n"
                           "3,4,1,2,c,ok\n");
}

TEST(SweepMerge, EmptyShardIsFine) {
  std::string a = write_temp("e_a.csv", kHeader + "0,1,0,1,x,ok\n");
  std::string b = write_temp("e_b.csv", kHeader);
  std::ostringstream out;
  merge_sweep_csvs({a, b}, out);
  EXPECT_EQ(out.str(), kHeader + "0,1,0,1,x,ok\n");
}

TEST(SweepMerge, DetectsProblems) {
  std::string a = write_temp("p_a.csv", kHeader + "0,3,0,1,x,ok\n1,3,0,2,x,ok\n");
  std::string dup = write_temp("p_dup.csv", kHeader + "1,3,0,2,x,ok\n");
  std::string err = merge_error({a, dup});
  EXPECT_NE(err.find("p_dup.csv:2: run_idx: run 1 also at "), std::string::npos) << err;
  EXPECT_NE(err.find("p_a.csv:3"), std::string::npos) << err;

  err = merge_error({a});
  EXPECT_NE(err.find("1 of 3 runs missing: 2"), std::string::npos) << err;

  std::string other = write_temp("p_other.csv", "run_idx,num_runs,config_idx,seed,y,status\n");
  err = merge_error({a, other});
  EXPECT_NE(err.find("p_other.csv:1: header differs from the header of"), std::string::npos) << err;

  std::string short_row = write_temp("p_short.csv", kHeader + "2,3,1\n");
  err = merge_error({a, short_row});
  EXPECT_NE(err.find("p_short.csv:2: row has 3 cells, the header 6"), std::string::npos) << err;

  std::string other_sweep = write_temp("p_n.csv", kHeader + "2,5,1,1,x,ok\n");
  err = merge_error({a, other_sweep});
  EXPECT_NE(err.find("num_runs: 5 differs from 3"), std::string::npos) << err;

  std::string not_sweep = write_temp("p_not.csv", "a,b\n");
  err = merge_error({not_sweep});
  EXPECT_NE(err.find("not a sweep CSV"), std::string::npos) << err;
}

}  // namespace
}  // namespace moesim::sim::study
