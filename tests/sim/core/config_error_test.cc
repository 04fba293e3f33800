// ConfigError messages: FILE[:LINE[:COL]]: KEY.PATH: REASON, with a reason quoting a huge input
// value, and a key path naming a huge key, cut to a readable length.
#include "sim/core/config_error.h"

#include <gtest/gtest.h>

#include <string>

namespace moesim::sim {
namespace {

TEST(ConfigError, FormatsFileLineColumnKeyAndReason) {
  EXPECT_STREQ(ConfigError("a.toml", 3, 7, "x.y", "bad").what(), "a.toml:3:7: x.y: bad");
  EXPECT_STREQ(ConfigError("a.toml", 3, 0, "", "bad").what(), "a.toml:3: bad");
  EXPECT_STREQ(ConfigError("", 0, 0, "k", "bad").what(), "<input>: k: bad");
}

TEST(ConfigError, CutsAHugeReason) {
  const ConfigError e("a.toml", 1, 0, "name", "unknown value '" + std::string(300000, 'v') + "'");
  const std::string what = e.what();
  EXPECT_LT(what.size(), 500u);
  EXPECT_EQ(what.rfind("a.toml:1: name: unknown value 'vvv", 0), 0u);
  EXPECT_NE(what.find("... (cut)"), std::string::npos);
  EXPECT_EQ(e.reason().size(), 300016u);  // the reason itself is kept whole for callers
}

TEST(ConfigError, CutsAHugeKeyPathAsItCutsAReason) {
  // A 100 KB unknown key was echoed whole in the message.
  const std::string key(100000, 'k');
  const ConfigError e("a.toml", 2, 1, "deployment." + key, "unknown key '" + key + "'");
  const std::string what = e.what();
  EXPECT_LT(what.size(), 850u);
  EXPECT_EQ(what.rfind("a.toml:2:1: deployment.kkk", 0), 0u);
  EXPECT_EQ(what, "a.toml:2:1: deployment." + std::string(389, 'k') + "... (cut): unknown key '" +
                      std::string(387, 'k') + "... (cut)");
  EXPECT_EQ(e.key_path().size(), 100011u);  // kept whole for callers
}

}  // namespace
}  // namespace moesim::sim
