// Input files: regular files within their kind's limit are read whole or streamed; a directory,
// a device, a FIFO, a missing file and a file over the limit are refused with the reason, before
// anything is read (/dev/zero was read until memory ran out).
#include "base/input_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "tests/support/scratch_files.h"

namespace moesim {
namespace {

std::string reason_of(const std::string& path, InputKind kind = InputKind::kConfig) {
  const std::optional<InputProblem> p = input_file_problem(path, kind);
  return p ? p->reason : "";
}

TEST(InputFile, ReadsARegularFileWholeAndAsAStream) {
  const std::string path = scratch::write("a.toml", "x = 1\ny = 2\n");
  EXPECT_EQ(input_file_problem(path, InputKind::kConfig), std::nullopt);
  InputFile whole(path, InputKind::kConfig);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole.read_all(), "x = 1\ny = 2\n");
  InputFile lines(path, InputKind::kData);
  std::string line, all;
  while (std::getline(lines.stream(), line)) all += line + ";";
  EXPECT_EQ(all, "x = 1;y = 2;");
  EXPECT_TRUE(lines.ok());
}

TEST(InputFile, AnEmptyFileIsRead) {
  InputFile f(scratch::write("empty", ""), InputKind::kConfig);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f.read_all(), "");
}

TEST(InputFile, DevicesDirectoriesAndFifosAreRefusedBeforeReading) {
  EXPECT_EQ(reason_of("/dev/zero"), "not a regular file (a character device)");
  EXPECT_EQ(reason_of("/dev/null"), "not a regular file (a character device)");
  EXPECT_EQ(reason_of("/tmp"), "not a regular file (a directory)");
  const std::string fifo = scratch::path("fifo");
  ::unlink(fifo.c_str());  // left by an earlier run
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(reason_of(fifo), "not a regular file (a FIFO)");  // and did not wait for a writer
}

TEST(InputFile, MissingFilesAreMarkedMissing) {
  const std::optional<InputProblem> p = input_file_problem("/nonexistent/a.toml", InputKind::kData);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->missing);
  EXPECT_EQ(p->reason, "cannot open: No such file or directory");
  const std::string file = scratch::write("plain", "x");
  EXPECT_TRUE(input_file_problem(file + "/below", InputKind::kData)->missing);  // ENOTDIR
}

TEST(InputFile, NamesBeyondThePathLimitsAreRefusedNotThrown) {
  std::string deep = "/tmp";
  while (deep.size() < 5000) deep += "/aaaaaaaaaa";
  const std::optional<InputProblem> p = input_file_problem(deep + ".toml", InputKind::kConfig);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->reason, "cannot open: File name too long");
  EXPECT_EQ(reason_of("/tmp/" + std::string(300, 'a')), "cannot open: File name too long");
}

TEST(InputFile, AFileOverItsKindsLimitIsRefusedBySize) {
  const std::string path = scratch::path("big.toml");
  {
    std::ofstream out(path);
    out.seekp(kMaxConfigFileBytes);  // sparse: 16 MiB + 1 byte, nothing written but one byte
    out.put('x');
  }
  EXPECT_EQ(reason_of(path), "16777217 bytes, larger than the 16 MiB limit of configuration files");
  EXPECT_EQ(input_file_problem(path, InputKind::kData), std::nullopt);
  EXPECT_EQ(max_input_bytes(InputKind::kData), int64_t{4} << 30);
}

TEST(InputFile, ReadingStopsAtTheLimitWhenTheFileGrows) {
  // A file within the limit when opened that grows past it while read (as /proc files, which
  // report size 0, may be larger than they say): the read ends at the limit with the reason.
  const std::string path = scratch::write("growing.toml", "x = 1\n");
  InputFile file(path, InputKind::kConfig);
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(::truncate(path.c_str(), kMaxConfigFileBytes + 4096), 0);
  EXPECT_EQ(file.read_all(), std::nullopt);
  ASSERT_TRUE(file.problem());
  EXPECT_EQ(file.problem()->reason,
            "larger than the 16 MiB limit of configuration files (read past it)");

  const std::string streamed = scratch::write("growing.jsonl", "{}\n");
  InputFile lines(streamed, InputKind::kConfig);
  ASSERT_EQ(::truncate(streamed.c_str(), kMaxConfigFileBytes + 1), 0);
  std::string line;
  size_t bytes = 0;
  while (std::getline(lines.stream(), line)) bytes += line.size() + 1;
  EXPECT_LE(bytes, static_cast<size_t>(kMaxConfigFileBytes) + 1);  // +1: no newline at the end
  EXPECT_FALSE(lines.ok());
}

TEST(InputFile, ProcFilesThatReportSizeZeroAreRead) {
  InputFile maps("/proc/self/maps", InputKind::kConfig);
  ASSERT_TRUE(maps.ok());
  const std::optional<std::string> text = maps.read_all();
  ASSERT_TRUE(text);
  EXPECT_GT(text->size(), 0u);
}

}  // namespace
}  // namespace moesim
