// Progress (apps/moesim/progress.h): the line's counts, bar and time left, resumed work left out
// of the rate, and the throttling of lines written to a file or pipe, on a hand-driven clock.
#include "apps/moesim/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace moesim::cli {
namespace {

TEST(FormatWallDuration, SecondsMinutesHours) {
  EXPECT_EQ(format_wall_duration(0), "0.0 s");
  EXPECT_EQ(format_wall_duration(4.24), "4.2 s");
  EXPECT_EQ(format_wall_duration(12.4), "12 s");
  EXPECT_EQ(format_wall_duration(185), "3 min 05 s");
  EXPECT_EQ(format_wall_duration(3720), "1 h 02 min");
  EXPECT_EQ(format_wall_duration(-1), "?");
}

TEST(Progress, LineHasCountsBarElapsedAndTimeLeft) {
  Progress p("sweep", "runs", true, false, [] { return 0.0; });
  // 2 of 8 runs in 10 s: 5 s a run, 6 runs left -> 30 s.
  EXPECT_EQ(p.line(2, 8, 10.0),
            "sweep [######..................] 2/8 runs, 10 s elapsed, about 30 s left");
  EXPECT_EQ(p.line(0, 8, 0.0),
            "sweep [........................] 0/8 runs, 0.0 s elapsed, time left unknown yet");
  EXPECT_EQ(p.line(8, 8, 40.0), "sweep [########################] 8/8 runs, 40 s elapsed, done");
}

TEST(Progress, ResumedWorkCountsAsDoneButNotInTheRate) {
  Progress p("sweep", "runs", true, false, [] { return 0.0; });
  p.set_resumed(6);
  // 6 resumed + 2 run here in 20 s: 10 s a run, 2 left -> 20 s (not 20 / 8 x 2 = 5 s).
  EXPECT_EQ(p.line(8, 10, 20.0),
            "sweep [###################.....] 8/10 runs, 20 s elapsed, about 20 s left");
  // Nothing run here yet: no estimate.
  EXPECT_NE(p.line(6, 10, 3.0).find("time left unknown yet"), std::string::npos);
}

TEST(Progress, DisabledHasNoCallback) {
  Progress p("compare", "runs", false, false);
  EXPECT_FALSE(p.enabled());
  EXPECT_FALSE(static_cast<bool>(p.callback()));
}

// Lines to a file: the first, then at most one a second, and always the last.
TEST(Progress, ThrottlesLinesOnAFileButNotTheLast) {
  double now = 100.0;
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(
      "search", "configurations", true, false, [&] { return now; }, f);
  auto cb = p.callback();
  now = 100.2;
  cb(1, 4);  // printed: the first
  now = 100.5;
  cb(2, 4);  // 0.3 s later: skipped
  now = 101.3;
  cb(3, 4);  // 1.1 s after the first: printed
  now = 101.4;
  cb(4, 4);  // the last: printed
  std::rewind(f);
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) text += buf;
  std::fclose(f);
  EXPECT_EQ(text,
            "search [######..................] 1/4 configurations, 0.2 s elapsed, about 0.6 s "
            "left\n"
            "search [##################......] 3/4 configurations, 1.3 s elapsed, about 0.4 s "
            "left\n"
            "search [########################] 4/4 configurations, 1.4 s elapsed, done\n");
}

}  // namespace
}  // namespace moesim::cli
