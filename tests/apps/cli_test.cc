#include "apps/moesim/cli.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace moesim::cli {
namespace {

std::string usage_error(CommandLine& cl, const std::vector<std::string>& argv) {
  try {
    cl.parse(argv);
  } catch (const UsageError& e) {
    return e.message;
  }
  return "";
}

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("--seed", "--seed"), 0u);
  EXPECT_EQ(edit_distance("--sed", "--seed"), 1u);
  EXPECT_EQ(edit_distance("--seeds", "--seed"), 1u);
  EXPECT_EQ(edit_distance("--sead", "--seed"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(Nearest, NamesTheClosestCandidateWithinALimit) {
  const std::vector<std::string> options = {"--out", "--set", "--seed", "--duration"};
  EXPECT_EQ(nearest("--ot", options), "--out");
  EXPECT_EQ(nearest("--duraton", options), "--duration");
  EXPECT_EQ(nearest("--sed", options), "--seed");  // ties: a letter left out
  EXPECT_EQ(nearest("--sex", options), "--set");   // else the first
  EXPECT_EQ(nearest("--frobnicate", options), "");
  // Shortened or former names: the shortest option containing them.
  EXPECT_EQ(nearest("--gpu-price", {"--gpu-price-per-hour", "--plan"}), "--gpu-price-per-hour");
  EXPECT_EQ(nearest("--model", {"--seed", "--network-model"}), "--network-model");
  EXPECT_EQ(nearest("-x", {"--seed", "--network-model"}), "");
}

TEST(CommandLine, ReadsPositionalsOptionsFlagsAndRepeatedValues) {
  std::string scenario;
  std::optional<int64_t> seed;
  std::optional<double> duration;
  std::optional<std::string> out;
  std::vector<std::string> sets;
  bool json = false;
  CommandLine cl("run SCENARIO [options]", "test");
  cl.positional("SCENARIO", &scenario, "a file")
      .option("--seed", &seed, "N", "seed")
      .option("--duration", &duration, "S", "duration")
      .option("-o,--out", &out, "DIR", "out")
      .option("--set", &sets, "K=V", "override")
      .flag("--json", &json, "json");
  ASSERT_TRUE(cl.parse({"--set", "a=1", "s.toml", "--seed=-3", "--duration", "0.5", "-o", "d",
                        "--set", "b=2", "--json"}));
  EXPECT_EQ(scenario, "s.toml");
  EXPECT_EQ(seed, -3);
  EXPECT_EQ(duration, 0.5);
  EXPECT_EQ(out, "d");
  EXPECT_EQ(sets, (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_TRUE(json);
}

TEST(CommandLine, UsageErrorsAreOneLineAndNameTheOption) {
  auto make = [](std::string* scenario, std::optional<int64_t>* seed,
                 std::optional<std::string>* out) {
    auto cl = std::make_unique<CommandLine>("run SCENARIO [options]", "test");
    cl->positional("SCENARIO", scenario, "a file")
        .option("--seed", seed, "N", "seed")
        .option("-o,--out", out, "DIR", "out");
    return cl;
  };
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"s.toml", "--ot", "x"}, "unknown option --ot (did you mean --out?)"},
      {{"s.toml", "--frobnicate"}, "unknown option --frobnicate"},
      {{"s.toml", "--seed", "x"}, "option --seed: not an integer: 'x'"},
      {{"s.toml", "--seed", "1.5"}, "option --seed: not an integer: '1.5'"},
      {{"s.toml", "--seed", "99999999999999999999"},
       "option --seed: integer out of range (beyond +-9.2e18): '99999999999999999999'"},
      {{"s.toml", "--seed", "1", "--seed", "2"}, "option --seed given twice"},
      {{"s.toml", "--seed"}, "option --seed needs a value"},
      {{}, "missing argument: SCENARIO"},
      {{"s.toml", "extra"}, "unexpected argument: extra"},
  };
  for (const auto& [argv, message] : cases) {
    std::string scenario;
    std::optional<int64_t> seed;
    std::optional<std::string> out;
    auto cl = make(&scenario, &seed, &out);
    EXPECT_EQ(usage_error(*cl, argv), message) << argv.size();
  }
}

TEST(CommandLine, HelpIsGeneratedFromTheDeclarations) {
  std::string scenario;
  std::optional<int64_t> seed;
  CommandLine cl("run SCENARIO [options]", "Simulates SCENARIO.");
  cl.positional("SCENARIO", &scenario, "a scenario file")
      .option("--seed", &seed, "N", "root seed")
      .footer("exit codes: 0 success");
  const std::string help = cl.help();
  EXPECT_EQ(help.rfind("usage: moesim run SCENARIO [options]\n", 0), 0u) << help;
  for (const char* part : {"Simulates SCENARIO.", "a scenario file", "--seed N", "root seed",
                           "exit codes: 0 success"}) {
    EXPECT_NE(help.find(part), std::string::npos) << part << " in\n" << help;
  }
  testing::internal::CaptureStdout();
  EXPECT_FALSE(cl.parse({"--help"}));
  EXPECT_EQ(testing::internal::GetCapturedStdout(), help);
}

TEST(CommandLine, NumbersAreFiniteAndWithinTheirType) {
  // Every command's numbers go through one parse: non-finite values and integers beyond int64
  // are refused, never clamped or passed on to a fit.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--spread", "nan"}, "option --spread: not a finite number: 'nan'"},
      {{"--spread", "inf"}, "option --spread: not a finite number: 'inf'"},
      {{"--spread", "-Infinity"}, "option --spread: not a finite number: '-Infinity'"},
      {{"--spread", "1e400"}, "option --spread: out of a double's range: '1e400'"},
      {{"--spread", "0x10"}, "option --spread: not a number: '0x10'"},
      {{"--count", "18446744073709551616"},
       "option --count: integer out of range (beyond +-9.2e18): '18446744073709551616'"},
      {{"--count", "-9223372036854775809"},
       "option --count: integer out of range (beyond +-9.2e18): '-9223372036854775809'"},
  };
  for (const auto& [argv, message] : cases) {
    std::optional<double> spread;
    std::optional<int64_t> count;
    CommandLine cl("calibrate [options]", "test");
    cl.option("--spread", &spread, "X", "x").option("--count", &count, "N", "n");
    EXPECT_EQ(usage_error(cl, argv), message) << argv[1];
  }
}

TEST(CommandLine, LongUnknownOptionsAreCutInTheMessage) {
  std::optional<int64_t> seed;
  CommandLine cl("run [options]", "test");
  cl.option("--seed", &seed, "N", "seed");
  const std::string message = usage_error(cl, {"--" + std::string(100000, 'k')});
  EXPECT_EQ(message, "unknown option --" + std::string(98, 'k') + "... (cut)");
}

TEST(CommandLine, ConvertedOptionsRunTheirConversionDuringParse) {
  std::vector<double> batches;
  CommandLine cl("layers [options]", "test");
  cl.option_with("--batches", "N,...", "batches",
                 [&](const std::string& text) { batches = parse_number_list("--batches", text); });
  ASSERT_TRUE(cl.parse({"--batches", "4,8"}));
  EXPECT_EQ(batches, (std::vector<double>{4, 8}));
  CommandLine bad("layers [options]", "test");
  bad.option_with("--batches", "N,...", "batches",
                  [&](const std::string& text) { batches = parse_number_list("--batches", text); });
  EXPECT_EQ(usage_error(bad, {"--batches", "4,nan"}), "--batches: not a finite number: 'nan'");
}

TEST(CommandLine, ParseOnlyChecksEverythingAndStopsBeforeTheCommand) {
  std::optional<int64_t> seed;
  std::string scenario;
  {
    const ParseOnly parse_only;
    CommandLine cl("run SCENARIO [options]", "test");
    cl.positional("SCENARIO", &scenario, "a file").option("--seed", &seed, "N", "seed");
    EXPECT_FALSE(cl.parse({"s.toml", "--seed", "4"}));
    EXPECT_EQ(seed, 4);
    CommandLine bad("run SCENARIO [options]", "test");
    bad.positional("SCENARIO", &scenario, "a file").option("--seed", &seed, "N", "seed");
    EXPECT_EQ(usage_error(bad, {"s.toml", "--seed", "x"}), "option --seed: not an integer: 'x'");
  }
  CommandLine cl("run SCENARIO [options]", "test");
  cl.positional("SCENARIO", &scenario, "a file");
  EXPECT_TRUE(cl.parse({"s.toml"}));
}

TEST(ParseNumberList, IsStrict) {
  EXPECT_EQ(parse_number_list("--batches", "4,8"), (std::vector<double>{4, 8}));
  try {
    parse_number_list("--batches", "4,x");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(e.message, "--batches: not a number: 'x'");
  }
}

}  // namespace
}  // namespace moesim::cli
