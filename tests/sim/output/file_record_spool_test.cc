// The file spool of rejected requests' records (sim/output/file_record_spool.h): first in, first
// out across its buffers and its file, space reused, nothing left in its directory, and a failed
// write an OutputError naming the directory.
#include "sim/output/file_record_spool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "sim/io/output_files.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::output {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const fs::path dir = scratch::path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// A record whose every field depends on `i` (strings of 0 to 40 bytes).
RequestRecord record(int64_t i) {
  RequestRecord r;
  r.request_id = static_cast<int32_t>(i);
  r.session_id = static_cast<int32_t>(i % 7) - 1;
  r.turn_idx = static_cast<int32_t>(i % 5);
  r.attempt_idx = static_cast<int32_t>(i % 3);
  r.replica = static_cast<int32_t>(i % 4) - 1;
  r.domain = std::string(static_cast<size_t>(i % 9), 'd');
  r.outcome = i % 2 == 0 ? RequestOutcome::kRejected : RequestOutcome::kCompleted;
  r.reject_reason = std::string(static_cast<size_t>(i % 41), 'r');
  r.arrival_ns = 1000 * i;
  r.first_scheduled_ns = i % 2 == 0 ? -1 : 1000 * i + 1;
  r.first_token_ns = 1000 * i + 2;
  r.done_ns = 1000 * i + 3;
  r.prompt_tokens = INT64_MAX - i;
  r.output_tokens = i + 1;
  r.generated_tokens = i / 2;
  r.cached_prompt_tokens = i / 3;
  r.num_preemptions = static_cast<int32_t>(i % 11);
  r.kv_load_ns = i * 7;
  r.loaded_prompt_tokens = i * 5;
  return r;
}

void expect_record(const RequestRecord& r, int64_t i) {
  const RequestRecord e = record(i);
  SCOPED_TRACE("record " + std::to_string(i));
  EXPECT_EQ(r.request_id, e.request_id);
  EXPECT_EQ(r.session_id, e.session_id);
  EXPECT_EQ(r.turn_idx, e.turn_idx);
  EXPECT_EQ(r.attempt_idx, e.attempt_idx);
  EXPECT_EQ(r.replica, e.replica);
  EXPECT_EQ(r.domain, e.domain);
  EXPECT_EQ(r.outcome, e.outcome);
  EXPECT_EQ(r.reject_reason, e.reject_reason);
  EXPECT_EQ(r.arrival_ns, e.arrival_ns);
  EXPECT_EQ(r.first_scheduled_ns, e.first_scheduled_ns);
  EXPECT_EQ(r.first_token_ns, e.first_token_ns);
  EXPECT_EQ(r.done_ns, e.done_ns);
  EXPECT_EQ(r.prompt_tokens, e.prompt_tokens);
  EXPECT_EQ(r.output_tokens, e.output_tokens);
  EXPECT_EQ(r.generated_tokens, e.generated_tokens);
  EXPECT_EQ(r.cached_prompt_tokens, e.cached_prompt_tokens);
  EXPECT_EQ(r.num_preemptions, e.num_preemptions);
  EXPECT_EQ(r.kv_load_ns, e.kv_load_ns);
  EXPECT_EQ(r.loaded_prompt_tokens, e.loaded_prompt_tokens);
}

TEST(FileRecordSpool, FirstInFirstOutThroughItsFile) {
  const std::string dir = fresh_dir("spool");
  FileRecordSpool spool(dir);
  EXPECT_TRUE(spool.empty());
  // Three pushes per pop, then drain: the records cross the buffers and the file many times.
  int64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 60000; ++round) {
    for (int k = 0; k < 3; ++k, ++next_in) spool.push(10 * next_in, record(next_in));
    ASSERT_EQ(spool.front_idx(), 10 * next_out);
    expect_record(spool.pop(), next_out++);
  }
  while (!spool.empty()) {
    ASSERT_EQ(spool.front_idx(), 10 * next_out);
    expect_record(spool.pop(), next_out++);
  }
  EXPECT_EQ(next_out, next_in);
  EXPECT_GT(spool.bytes_written(), int64_t{4} << 20);
  EXPECT_TRUE(fs::is_empty(dir));  // an unnamed file
}

TEST(FileRecordSpool, SpaceIsReusedOnceEmpty) {
  const std::string dir = fresh_dir("spool");
  FileRecordSpool spool(dir);
  for (int pass = 0; pass < 4; ++pass) {
    for (int64_t i = 0; i < 50000; ++i) spool.push(i, record(i));
    for (int64_t i = 0; i < 50000; ++i) expect_record(spool.pop(), i);
    EXPECT_TRUE(spool.empty());
  }
  // Four passes written, at most one held.
  EXPECT_GT(spool.bytes_written(), 3 * spool.max_file_bytes());
}

TEST(FileRecordSpool, AFailedWriteNamesTheDirectory) {
  const std::string dir = fresh_dir("spool");
  FileRecordSpool spool(dir);
  // A file size limit stands for a full disk: writes past it fail with EFBIG.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 256 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    for (int64_t i = 0; i < 100000; ++i) spool.push(i, record(i));
  } catch (const io::OutputError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(message, "cannot write " + dir +
                         " (an unnamed spool file of rejected requests' records): write: File "
                         "too large");
}

TEST(FileRecordSpool, AMissingDirectoryIsAnOutputError) {
  const std::string dir = fresh_dir("spool") + "/missing";
  try {
    FileRecordSpool spool(dir);
    FAIL() << "no error";
  } catch (const io::OutputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot write " + dir +
                  " (an unnamed spool file of rejected requests' records): cannot make: No such "
                  "file or directory");
  }
}

}  // namespace
}  // namespace moesim::sim::output
