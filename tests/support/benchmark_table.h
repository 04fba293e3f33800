// The published benchmark tables the public-profile tests hold moesim against
// (profiles/h800-public.validation/*.csv: copies of ../shared/data/benchmarks/ and the
// FlashAttention-3 table transcribed there, README.md there): plain CSV with a
// header line and no quoted cells.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace moesim::sim {

// The cells of every data row of `path` with at least `min_cells` cells (the header skipped).
inline std::vector<std::vector<std::string>> read_benchmark_rows(const std::string& path,
                                                                 size_t min_cells) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::vector<std::vector<std::string>> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::vector<std::string> cells;
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (cells.size() >= min_cells) rows.push_back(std::move(cells));
  }
  return rows;
}

}  // namespace moesim::sim
