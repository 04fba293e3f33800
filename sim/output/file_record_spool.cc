#include "sim/output/file_record_spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/check.h"
#include "sim/io/output_files.h"

namespace moesim::sim::output {
namespace {

// The numbers of a record, in one block (host byte order: the file never leaves the process).
struct Fixed {
  int64_t arrival_idx;
  int64_t arrival_ns, first_scheduled_ns, first_token_ns, done_ns;
  int64_t prompt_tokens, output_tokens, generated_tokens, cached_prompt_tokens;
  int64_t kv_load_ns, loaded_prompt_tokens;
  int32_t request_id, session_id, turn_idx, attempt_idx, replica, num_preemptions;
  int32_t outcome;
  uint32_t domain_bytes, reason_bytes;
};

void append(std::vector<char>& buf, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  buf.insert(buf.end(), c, c + n);
}

}  // namespace

FileRecordSpool::FileRecordSpool(const std::string& dir) : dir_(dir) {
  fd_ = io::open_unnamed_file(dir_);
  if (fd_ < 0) fail("cannot make", errno);
  read_buf_.reserve(kBufferBytes);
  write_buf_.reserve(kBufferBytes);
}

FileRecordSpool::~FileRecordSpool() {
  if (fd_ >= 0) ::close(fd_);
}

void FileRecordSpool::fail(const std::string& what, int err) const {
  throw io::OutputError("cannot write " + dir_ + " (an unnamed spool file of rejected requests' " +
                        "records): " + what + ": " + std::strerror(err));
}

void FileRecordSpool::push(int64_t arrival_idx, const RequestRecord& r) {
  ++num_records_;
  if (!head_) {
    MOESIM_CHECK(num_records_ == 1, "spool records without a head");
    head_.emplace(arrival_idx, r);
    return;
  }
  const Fixed f{arrival_idx,
                r.arrival_ns,
                r.first_scheduled_ns,
                r.first_token_ns,
                r.done_ns,
                r.prompt_tokens,
                r.output_tokens,
                r.generated_tokens,
                r.cached_prompt_tokens,
                r.kv_load_ns,
                r.loaded_prompt_tokens,
                r.request_id,
                r.session_id,
                r.turn_idx,
                r.attempt_idx,
                r.replica,
                r.num_preemptions,
                static_cast<int32_t>(r.outcome),
                static_cast<uint32_t>(r.domain.size()),
                static_cast<uint32_t>(r.reject_reason.size())};
  append(write_buf_, &f, sizeof f);
  append(write_buf_, r.domain.data(), r.domain.size());
  append(write_buf_, r.reject_reason.data(), r.reject_reason.size());
  if (write_buf_.size() >= kBufferBytes) flush();
}

void FileRecordSpool::flush() {
  size_t done = 0;
  while (done < write_buf_.size()) {
    const ssize_t n =
        ::pwrite(fd_, write_buf_.data() + done, write_buf_.size() - done, file_end_ + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", errno);
    }
    done += static_cast<size_t>(n);
  }
  file_end_ += static_cast<int64_t>(done);
  bytes_written_ += static_cast<int64_t>(done);
  max_file_bytes_ = std::max(max_file_bytes_, file_end_ - punched_);
  write_buf_.clear();
}

void FileRecordSpool::read_exact(char* out, size_t n) {
  while (n > 0) {
    if (read_pos_ == read_buf_.size()) {
      read_buf_.clear();
      read_pos_ = 0;
      if (read_off_ < file_end_) {
        const auto want = static_cast<size_t>(
            std::min<int64_t>(static_cast<int64_t>(kBufferBytes), file_end_ - read_off_));
        read_buf_.resize(want);
        const ssize_t got = ::pread(fd_, read_buf_.data(), want, read_off_);
        if (got <= 0) {
          const int err = got < 0 ? errno : EIO;
          read_buf_.clear();
          if (err == EINTR) continue;
          fail("read", err);
        }
        read_buf_.resize(static_cast<size_t>(got));
        read_off_ += got;
        // Give back what was read, 16 MiB at a time (where the file system can punch holes).
        constexpr int64_t kPunchBytes = int64_t{16} << 20;
        if (read_off_ - punched_ >= kPunchBytes) {
          const int64_t to = read_off_ / kPunchBytes * kPunchBytes;
          if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, punched_,
                          to - punched_) == 0) {
            punched_ = to;
          }
        }
      } else {
        MOESIM_CHECK(!write_buf_.empty(), "spool read past its end");
        read_buf_.swap(write_buf_);
        // The file is all read: it is written from its start again.
        if (file_end_ > 0 && ::ftruncate(fd_, 0) != 0) fail("truncate", errno);
        read_off_ = file_end_ = punched_ = 0;
      }
      continue;
    }
    const size_t k = std::min(n, read_buf_.size() - read_pos_);
    std::memcpy(out, read_buf_.data() + read_pos_, k);
    read_pos_ += k;
    out += k;
    n -= k;
  }
}

void FileRecordSpool::load_head() {
  Fixed f;
  read_exact(reinterpret_cast<char*>(&f), sizeof f);
  RequestRecord r;
  r.arrival_ns = f.arrival_ns;
  r.first_scheduled_ns = f.first_scheduled_ns;
  r.first_token_ns = f.first_token_ns;
  r.done_ns = f.done_ns;
  r.prompt_tokens = f.prompt_tokens;
  r.output_tokens = f.output_tokens;
  r.generated_tokens = f.generated_tokens;
  r.cached_prompt_tokens = f.cached_prompt_tokens;
  r.kv_load_ns = f.kv_load_ns;
  r.loaded_prompt_tokens = f.loaded_prompt_tokens;
  r.request_id = f.request_id;
  r.session_id = f.session_id;
  r.turn_idx = f.turn_idx;
  r.attempt_idx = f.attempt_idx;
  r.replica = f.replica;
  r.num_preemptions = f.num_preemptions;
  r.outcome = static_cast<RequestOutcome>(f.outcome);
  r.domain.resize(f.domain_bytes);
  read_exact(r.domain.data(), f.domain_bytes);
  r.reject_reason.resize(f.reason_bytes);
  read_exact(r.reject_reason.data(), f.reason_bytes);
  head_.emplace(f.arrival_idx, std::move(r));
}

RequestRecord FileRecordSpool::pop() {
  MOESIM_CHECK(head_.has_value(), "pop from an empty spool");
  RequestRecord out = std::move(head_->second);
  head_.reset();
  if (--num_records_ > 0) {
    load_head();
  } else {
    // Empty: the file is written from its start again.
    MOESIM_CHECK(read_pos_ == read_buf_.size() && read_off_ == file_end_ && write_buf_.empty(),
                 "spool bytes left without records");
    read_buf_.clear();
    read_pos_ = 0;
    if (file_end_ > 0 && ::ftruncate(fd_, 0) != 0) fail("truncate", errno);
    read_off_ = file_end_ = punched_ = 0;
  }
  return out;
}

}  // namespace moesim::sim::output
