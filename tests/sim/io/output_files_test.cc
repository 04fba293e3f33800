// Output files: atomic writes (no temporary left, no half file, an old file kept on failure),
// failed writes reported with the path and errno text and in the order they failed, output paths
// checked before use, the output-directory and output-file locks, and journals.
#include "sim/io/output_files.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>

#include "sim/config/config_error.h"

namespace moesim::sim::io {
namespace {

namespace fs = std::filesystem;

class OutputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(MOESIM_BINARY_DIR) / "tests" / "output_files_test" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.insert(e.path().filename().string());
    return names;
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  fs::path dir_;
};

TEST_F(OutputFilesTest, AtomicWriteLeavesOnlyTheFinalFile) {
  write_file_atomically(path("a.json"), [](std::ostream& os) { os << "{\"x\": 1}\n"; });
  EXPECT_EQ(read(path("a.json")), "{\"x\": 1}\n");
  EXPECT_EQ(entries(), std::set<std::string>{"a.json"});
  // Replacing keeps one file with the new bytes; a large write crosses the buffer many times.
  const std::string big(1 << 20, 'z');
  write_file_atomically(path("a.json"), [&](std::ostream& os) { os << big; });
  EXPECT_EQ(read(path("a.json")), big);
  EXPECT_EQ(entries(), std::set<std::string>{"a.json"});
}

TEST_F(OutputFilesTest, ReplacedFileKeepsItsPermissions) {
  write_file_atomically(path("p.toml"), [](std::ostream& os) { os << "old\n"; });
  fs::permissions(path("p.toml"), fs::perms::owner_read | fs::perms::owner_write);
  write_file_atomically(path("p.toml"), [](std::ostream& os) { os << "new\n"; });
  EXPECT_EQ(fs::status(path("p.toml")).permissions() & fs::perms::mask,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(read(path("p.toml")), "new\n");
}

TEST_F(OutputFilesTest, TemporaryIsBesideTheFileUntilCommit) {
  AtomicFile f(path("b.csv"));
  f.stream() << "a,b\n";
  ASSERT_FALSE(f.temp_path().empty());
  EXPECT_EQ(fs::path(f.temp_path()).parent_path(), dir_);
  EXPECT_TRUE(fs::exists(f.temp_path()));
  EXPECT_FALSE(fs::exists(path("b.csv")));  // a reader never sees a half file
  f.commit();
  EXPECT_EQ(read(path("b.csv")), "a,b\n");
  EXPECT_EQ(entries(), std::set<std::string>{"b.csv"});
}

TEST_F(OutputFilesTest, ExceptionWhileWritingKeepsTheOldFile) {
  write_file_atomically(path("c.txt"), [](std::ostream& os) { os << "old\n"; });
  EXPECT_THROW(write_file_atomically(path("c.txt"),
                                     [](std::ostream& os) {
                                       os << "new, half";
                                       throw std::runtime_error("writer failed");
                                     }),
               std::runtime_error);
  EXPECT_EQ(read(path("c.txt")), "old\n");
  EXPECT_EQ(entries(), std::set<std::string>{"c.txt"});
}

// A real failed write(2) on the temporary: the file size limit (EFBIG). The old file stays,
// the temporary is removed, the error names the path and the system's reason.
TEST_F(OutputFilesTest, FailedWriteIsAnOutputErrorAndKeepsTheOldFile) {
  write_file_atomically(path("d.csv"), [](std::ostream& os) { os << "old\n"; });
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    write_file_atomically(path("d.csv"), [](std::ostream& os) { os << std::string(1 << 20, 'x'); });
  } catch (const OutputError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(message, "cannot write " + path("d.csv") + ": " + std::strerror(EFBIG));
  EXPECT_EQ(read(path("d.csv")), "old\n");
  EXPECT_EQ(entries(), std::set<std::string>{"d.csv"});
}

TEST_F(OutputFilesTest, FullDeviceIsAnOutputErrorWithTheErrnoText) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  try {
    write_file_atomically("/dev/full", [](std::ostream& os) { os << "x\n"; });
    FAIL() << "writing /dev/full succeeded";
  } catch (const OutputError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write /dev/full: No space left on device");
  }
  EXPECT_TRUE(fs::is_character_file("/dev/full"));  // written in place, never renamed over
}

TEST_F(OutputFilesTest, DevicesAreWrittenInPlace) {
  write_file_atomically("/dev/null", [](std::ostream& os) { os << std::string(100000, 'x'); });
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(OutputFilesTest, LinkToAFileKeepsTheLink) {
  write_file_atomically(path("target.txt"), [](std::ostream& os) { os << "old\n"; });
  fs::create_symlink("target.txt", dir_ / "link.txt");
  write_file_atomically(path("link.txt"), [](std::ostream& os) { os << "new\n"; });
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.txt"));
  EXPECT_EQ(read(path("target.txt")), "new\n");
}

TEST_F(OutputFilesTest, MissingDirectoryIsAnOutputError) {
  EXPECT_THROW(write_file_atomically(path("no/such/dir/e.txt"), [](std::ostream&) {}), OutputError);
}

TEST_F(OutputFilesTest, CopyIsByteExact) {
  const std::string bytes("a\0b\r\n", 5);
  write_file_atomically(path("src.bin"), [&](std::ostream& os) { os << bytes; });
  copy_file_atomically(path("src.bin"), path("dst.bin"));
  EXPECT_EQ(read(path("dst.bin")), bytes);
  write_file_atomically(path("empty"), [](std::ostream&) {});
  copy_file_atomically(path("empty"), path("empty.copy"));
  EXPECT_EQ(read(path("empty.copy")), "");
  EXPECT_THROW(copy_file_atomically(path("missing"), path("x")), OutputError);
  EXPECT_FALSE(fs::exists(path("x")));
}

TEST_F(OutputFilesTest, OutputDirIsCreatedOrRefused) {
  ensure_output_dir(path("new/nested"), "--out");
  EXPECT_TRUE(fs::is_directory(path("new/nested")));
  ensure_output_dir(path("new/nested"), "--out");  // already a directory: fine
  write_file_atomically(path("file"), [](std::ostream& os) { os << "x"; });
  try {
    ensure_output_dir(path("file"), "--out");
    FAIL() << "a regular file was accepted as a directory";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), path("file") + ": --out: exists and is not a directory");
  }
  try {
    ensure_output_dir(path("file/sub"), "--out");
    FAIL() << "a directory under a regular file was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), path("file/sub"));
    EXPECT_NE(e.reason().find(std::strerror(ENOTDIR)), std::string::npos) << e.what();
  }
  EXPECT_EQ(read(path("file")), "x");
}

TEST_F(OutputFilesTest, OutputFileIsCheckedWithoutCreatingIt) {
  check_output_file(path("f.jsonl"), "--record");
  check_output_file("/dev/null", "--record");
  EXPECT_EQ(entries(), std::set<std::string>{});
  EXPECT_THROW(check_output_file(dir_.string(), "--record"), ConfigError);
  EXPECT_THROW(check_output_file(path("missing/f.jsonl"), "--record"), ConfigError);
  write_file_atomically(path("plain"), [](std::ostream&) {});
  try {
    check_output_file(path("plain/f.jsonl"), "--record");
    FAIL() << "a file under a regular file was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "--record");
    EXPECT_NE(e.reason().find(std::strerror(ENOTDIR)), std::string::npos) << e.what();
  }
}

TEST_F(OutputFilesTest, LockRefusesASecondHolder) {
  const std::string out = path("out");
  {
    OutputDirLock first(out, "--out");
    EXPECT_TRUE(fs::exists(fs::path(out) / kLockFileName));
    try {
      OutputDirLock second(out, "--out");
      FAIL() << "a second lock on one directory was granted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("in use by another moesim run"), std::string::npos)
          << e.what();
      EXPECT_EQ(e.file(), out);
    }
    OutputDirLock moved(std::move(first));  // still held
    EXPECT_THROW(OutputDirLock(out, "--out"), ConfigError);
  }
  OutputDirLock again(out, "--out");  // released with its holder
  write_file_atomically(path("plain"), [](std::ostream&) {});
  EXPECT_THROW(OutputDirLock(path("plain"), "--out"), ConfigError);
}

TEST_F(OutputFilesTest, PreparedFilesAppearOnlyWhenPublished) {
  write_file_atomically(path("a.csv"), [](std::ostream& os) { os << "old\n"; });
  std::unique_ptr<AtomicFile> file =
      prepared_file(path("a.csv"), [](std::ostream& os) { os << "new\n"; });
  EXPECT_EQ(read(path("a.csv")), "old\n");  // complete under its temporary name only
  EXPECT_EQ(entries().size(), 2u);
  file->publish();
  EXPECT_EQ(read(path("a.csv")), "new\n");
  EXPECT_EQ(entries(), std::set<std::string>{"a.csv"});
  { auto dropped = prepared_copy(path("a.csv"), path("b.csv")); }  // never published
  EXPECT_EQ(entries(), std::set<std::string>{"a.csv"});
}

// Every file written after a full disk (here: past the file size limit) fails; the order of the
// failures tells which one the limit stopped first.
TEST_F(OutputFilesTest, FailedWritesAreOrdered) {
  AtomicFile first(path("first.csv")), second(path("second.csv")), fine(path("fine.csv"));
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  second.stream() << std::string(1 << 17, 'x') << std::flush;
  first.stream() << std::string(1 << 17, 'x') << std::flush;
  fine.stream() << "x" << std::flush;
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  ASSERT_GE(second.failed_write_seq(), 0);
  EXPECT_GT(first.failed_write_seq(), second.failed_write_seq());
  EXPECT_EQ(fine.failed_write_seq(), -1);
  EXPECT_THROW(first.commit(), OutputError);
  EXPECT_THROW(second.commit(), OutputError);
  fine.commit();
  EXPECT_EQ(entries(), std::set<std::string>{"fine.csv"});
}

TEST_F(OutputFilesTest, FileLockRefusesASecondHolderAndLeavesNothing) {
  const std::string record = path("steps.jsonl");
  {
    OutputFileLock first(record, "--record");
    EXPECT_EQ(first.lock_path(), path(".steps.jsonl.moesim.lock"));
    EXPECT_TRUE(fs::exists(first.lock_path()));
    try {
      OutputFileLock second(record, "--record");
      FAIL() << "a second lock on one file was granted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.file(), record);
      EXPECT_EQ(e.key_path(), "--record");
      EXPECT_NE(e.reason().find("in use by another moesim run"), std::string::npos) << e.what();
    }
    OutputFileLock moved(std::move(first));
    EXPECT_THROW(OutputFileLock(record, "--record"), ConfigError);
  }
  EXPECT_TRUE(entries().empty());  // the holder removed its lock file
  OutputFileLock again(record, "--record");
  EXPECT_EQ(OutputFileLock("/dev/null", "--record").lock_path(), "");  // a device: not locked
}

TEST_F(OutputFilesTest, StaleTemporariesOfTheNamedOutputsAreRemoved) {
  for (const char* name : {".requests.csv.tmp.123.0", ".summary.json.tmp.9.4", "requests.csv",
                           ".report.html.tmp.77", ".requests.csv.bak"}) {
    std::ofstream(path(name)) << "x";
  }
  remove_stale_temporaries(dir_.string(), {"requests.csv", "summary.json"});
  EXPECT_EQ(entries(),
            (std::set<std::string>{"requests.csv", ".report.html.tmp.77", ".requests.csv.bak"}));
  remove_stale_temporaries(dir_.string(), {});
  EXPECT_EQ(entries(), (std::set<std::string>{"requests.csv", ".requests.csv.bak"}));
}

TEST_F(OutputFilesTest, JournalRecordsAreTheCompleteLinesAfterTheHeader) {
  EXPECT_EQ(num_journal_records(path("absent")), 0);
  std::ofstream(path("header")) << "run_idx,num_runs\n";
  EXPECT_EQ(num_journal_records(path("header")), 0);
  std::ofstream(path("rows")) << "run_idx,num_runs\n0,3\n1,3\n2,";
  EXPECT_EQ(num_journal_records(path("rows")), 2);
}

TEST_F(OutputFilesTest, JournalIsLockedBeforeItIsTruncated) {
  std::ofstream(path("s.csv.partial")) << "header\nrow\n";
  JournalFile journal(path("s.csv.partial"), "--out");
  EXPECT_EQ(read(path("s.csv.partial")), "header\nrow\n");  // untouched until start()
  EXPECT_THROW(JournalFile(path("s.csv.partial"), "--out"), ConfigError);
  journal.start(7);
  journal.stream() << "next\n" << std::flush;
  journal.check();
  journal.commit(path("s.csv"));
  EXPECT_EQ(read(path("s.csv")), "header\nnext\n");
}

}  // namespace
}  // namespace moesim::sim::io
