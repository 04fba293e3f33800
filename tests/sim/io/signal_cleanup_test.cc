// A signal during a command: the registered temporaries and lock files are removed, a journal is
// kept and named, one line says so on stderr, and the process ends by the signal. Each case runs
// in a child process (a death test): the clean-up blocks the signals in it for good.
#include "sim/io/signal_cleanup.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sim/io/output_files.h"

namespace moesim::sim::io {
namespace {

namespace fs = std::filesystem;

fs::path test_dir() {
  const fs::path dir = fs::path(MOESIM_BINARY_DIR) / "tests" / "signal_cleanup_test" /
                       ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

[[noreturn]] void signal_self_and_wait(int sig) {
  ::kill(::getpid(), sig);  // process-directed, as from kill(1) or a terminal
  for (;;) ::pause();
}

TEST(SignalCleanup, RegistersWhileTheFileIsUnpublished) {
  const fs::path dir = test_dir();
  const int64_t before = num_signal_paths();
  {
    AtomicFile file((dir / "a.csv").string());
    EXPECT_EQ(num_signal_paths(), before + 1);
    file.commit();
    EXPECT_EQ(num_signal_paths(), before);
  }
  {
    OutputFileLock lock((dir / "b.jsonl").string(), "--record");
    AtomicFile dropped((dir / "c.csv").string());
    EXPECT_EQ(num_signal_paths(), before + 2);
  }
  EXPECT_EQ(num_signal_paths(), before);
}

TEST(SignalCleanupDeathTest, SigtermRemovesTemporariesAndLockFiles) {
  const fs::path dir = test_dir();
  EXPECT_EXIT(
      {
        install_signal_cleanup("moesim");
        AtomicFile trace((dir / "trace.json").string());
        trace.stream() << std::string(1 << 20, 'x') << std::flush;
        AtomicFile summary((dir / "summary.json").string());
        OutputFileLock lock((dir / "steps.jsonl").string(), "--record");
        signal_self_and_wait(SIGTERM);
      },
      ::testing::KilledBySignal(SIGTERM),
      "^moesim: stopped by SIGTERM: removed 3 temporary files\n$");
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(SignalCleanupDeathTest, SigintKeepsAJournalAndNamesIt) {
  const fs::path dir = test_dir();
  const std::string partial = (dir / "sweep.csv.partial").string();
  EXPECT_EXIT(
      {
        install_signal_cleanup("moesim");
        JournalFile journal(partial, "--out");
        journal.start(0);
        journal.stream() << "run_idx\n0\n" << std::flush;
        AtomicFile plan((dir / "plan.json").string());
        signal_self_and_wait(SIGINT);
      },
      ::testing::KilledBySignal(SIGINT),
      "^moesim: stopped by SIGINT: removed 1 temporary file; .*/sweep.csv.partial keeps the "
      "finished work \\(--resume continues\\)\n$");
  std::ifstream in(partial);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "run_idx\n0\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(SignalCleanupDeathTest, SighupEndsTheProcessToo) {
  EXPECT_EXIT(
      {
        install_signal_cleanup("moesim");
        signal_self_and_wait(SIGHUP);
      },
      ::testing::KilledBySignal(SIGHUP),
      "^moesim: stopped by SIGHUP: removed 0 temporary files\n$");
}

// nohup's SIGHUP (ignored when the program starts) stays ignored.
TEST(SignalCleanupDeathTest, AnIgnoredSignalStaysIgnored) {
  EXPECT_EXIT(
      {
        ::signal(SIGHUP, SIG_IGN);
        install_signal_cleanup("moesim");
        ::kill(::getpid(), SIGHUP);
        signal_self_and_wait(SIGTERM);
      },
      ::testing::KilledBySignal(SIGTERM), "stopped by SIGTERM");
}

}  // namespace
}  // namespace moesim::sim::io
