#include "sim/config/toml_source.h"

#include <gtest/gtest.h>

#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

using testing::config_error_of;

TEST(TomlSource, ReadsValuesAndRejectsUnknownKeysWithSuggestion) {
  auto doc = TomlDocument::parse_string(
      "name = 'x'\nnum_gpus = 8\n[hw]\nflops = 1e15\nhbm_gbs = 3\n", "t.toml");
  TomlTable root = doc.root();
  EXPECT_EQ(root.get_string("name"), "x");
  EXPECT_EQ(root.get_int_in("num_gpus", 1, 64), 8);
  TomlTable hw = root.get_table("hw");
  EXPECT_DOUBLE_EQ(hw.get_double("flops"), 1e15);
  EXPECT_EQ(config_error_of([&] { hw.finish(); }),
            "t.toml:5:1: hw.hbm_gbs: unknown key 'hbm_gbs' (valid keys: flops)");
  hw.get_double_or("hbm_gbps", 1.0);
  EXPECT_NE(config_error_of([&] { hw.finish(); }).find("did you mean 'hbm_gbps'"),
            std::string::npos);
  root.finish();
}

TEST(TomlSource, OutOfRangeIsAnErrorNotClamped) {
  auto doc = TomlDocument::parse_string("n = 0\n", "t.toml");
  TomlTable root = doc.root();
  EXPECT_EQ(config_error_of([&] { root.get_int_in("n", 1, 4); }),
            "t.toml:1:5: n: value 0 is out of range [1, 4]");
}

TEST(TomlSource, MissingAndWrongType) {
  auto doc = TomlDocument::parse_string("[a]\nb = 'str'\n", "t.toml");
  TomlTable a = doc.root().get_table("a");
  EXPECT_EQ(config_error_of([&] { a.get_int("b"); }),
            "t.toml:2:5: a.b: expected an integer, got string");
  EXPECT_EQ(config_error_of([&] { a.get_int("c"); }).find("a.c: missing required key"),
            std::string("t.toml:1:1: ").size());
}

TEST(TomlSource, SyntaxErrorHasLineAndColumn) {
  std::string e = config_error_of([] { TomlDocument::parse_string("a = = 1\n", "bad.toml"); });
  EXPECT_EQ(e.rfind("bad.toml:1:", 0), 0u) << e;
  EXPECT_NE(e.find("TOML syntax error"), std::string::npos);
}

TEST(TomlSource, EnumListsValidValues) {
  auto doc = TomlDocument::parse_string("kind = 'mla2'\n", "t.toml");
  TomlTable root = doc.root();
  EXPECT_EQ(config_error_of([&] {
              root.get_enum("kind", {"mla", "gqa"});
            }),
            "t.toml:1:8: kind: unknown value 'mla2' (valid: mla, gqa)");
}

TEST(TomlSource, AHugeUnknownKeyIsCutInTheMessage) {
  // A 100 KB unknown key was echoed whole, in the key path and in the reason.
  auto doc = TomlDocument::parse_string("[hw]\n" + std::string(100000, 'k') + " = 1\n", "t.toml");
  TomlTable hw = doc.root().get_table("hw");
  const std::string message = config_error_of([&] { hw.finish(); });
  EXPECT_LT(message.size(), 1000u);
  EXPECT_EQ(message.rfind("t.toml:2:1: hw.kkkk", 0), 0u) << message.substr(0, 100);
}

TEST(TomlSource, FilesThatAreNotRegularAreRefusedBeforeReading) {
  // /dev/zero was read until memory ran out.
  EXPECT_EQ(config_error_of([] { TomlDocument::load_file("/dev/zero"); }),
            "/dev/zero: not a regular file (a character device)");
  EXPECT_EQ(config_error_of([] { TomlDocument::load_file("/"); }),
            "/: not a regular file (a directory)");
  EXPECT_EQ(config_error_of([] { TomlDocument::load_file("/nonexistent/a.toml"); }),
            "/nonexistent/a.toml: cannot open file");
}

}  // namespace
}  // namespace moesim::sim
