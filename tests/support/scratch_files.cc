#include "tests/support/scratch_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace moesim::scratch {

std::string path(const std::string& name) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string leaf =
      info == nullptr ? std::string("moesim-no-test")
                      : std::string("moesim-") + info->test_suite_name() + "." + info->name();
  std::string cleaned;
  for (const char c : leaf) cleaned += (c == '/' ? '_' : c);  // parameterized names hold '/'
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / cleaned;
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::string write(const std::string& name, const std::string& text) {
  const std::string file = path(name);
  std::ofstream f(file, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) throw std::runtime_error("cannot write scratch file " + file);
  return file;
}

}  // namespace moesim::scratch
