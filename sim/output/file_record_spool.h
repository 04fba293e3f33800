// A RecordSpool (sim/metrics/record_spool.h) in an unnamed file, so that the records of requests
// rejected on arrival wait on disk, not in memory, while `moesim run --out` streams
// requests.csv: memory is two 64 KiB buffers whatever the arrival rate. The file is made with
// O_TMPFILE in the output directory (where the file system lacks it, a temporary name unlinked
// at once), so no signal or kill can leave it behind; its space is reused whenever the spool
// empties, and the part already read is given back to the file system (a punched hole) as the
// spool drains. Records are written in a fixed binary layout private to this file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/metrics/record_spool.h"

namespace moesim::sim::output {

class FileRecordSpool final : public RecordSpool {
 public:
  // Opens the unnamed file in directory `dir`. Throws io::OutputError "cannot write DIR (an
  // unnamed spool file): REASON" when it cannot be made, and from push() / pop() when a write
  // or read fails (a full disk).
  explicit FileRecordSpool(const std::string& dir);
  ~FileRecordSpool() override;
  FileRecordSpool(const FileRecordSpool&) = delete;
  FileRecordSpool& operator=(const FileRecordSpool&) = delete;

  void push(int64_t arrival_idx, const RequestRecord& record) override;
  bool empty() const override { return num_records_ == 0; }
  int64_t front_idx() const override { return head_->first; }
  RequestRecord pop() override;

  // Bytes ever written to the file and the most it held at once, for tests and figures.
  int64_t bytes_written() const { return bytes_written_; }
  int64_t max_file_bytes() const { return max_file_bytes_; }

 private:
  static constexpr size_t kBufferBytes = size_t{64} << 10;

  [[noreturn]] void fail(const std::string& what, int err) const;
  // Writes the write buffer at the end of the file's unread region.
  void flush();
  // The next `n` bytes of the stream (read buffer, then the file, then the write buffer).
  void read_exact(char* out, size_t n);
  // Decodes the next record of the stream into head_.
  void load_head();

  std::string dir_;
  int fd_ = -1;
  // The oldest record, decoded; the rest are in the stream: read_buf_ from read_pos_ on, the
  // file from read_off_ to file_end_, then write_buf_.
  std::optional<std::pair<int64_t, RequestRecord>> head_;
  int64_t num_records_ = 0;
  std::vector<char> read_buf_, write_buf_;
  size_t read_pos_ = 0;
  int64_t read_off_ = 0, file_end_ = 0, punched_ = 0;
  int64_t bytes_written_ = 0, max_file_bytes_ = 0;
};

}  // namespace moesim::sim::output
