// Every file the simulator or the engine reads as input (scenarios, model cards, HF configs,
// topologies, profiles, sweep files, pruning plans, traces, step traces, routing traces,
// measurements, journals, CSVs) is opened through InputFile: it must be a regular file (a
// directory, device, FIFO or socket is refused before a byte is read: /dev/zero read until memory
// ran out) of at most its kind's size limit, and reading stops at that limit even where the size
// stat() reports is wrong (/proc files report 0) or the file grows while read. Nothing here
// throws: callers turn problem() into their own bad-input error (sim: ConfigError; engine:
// InputError), naming the file. docs/reliability.md ("Inputs") states the limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string>

namespace moesim {

// Configuration: TOML or JSON documents written by people or small tools (scenarios, model cards,
// HF config.json, topologies, profiles, sweep files, pruning plans). The largest shipped one is
// 13 KB.
inline constexpr int64_t kMaxConfigFileBytes = int64_t{16} << 20;  // 16 MiB
// Data: traces (Mooncake, Azure, routing, step traces), measurements, nccl-tests outputs, search
// journals, sweep CSVs. The largest shipped trace is 3 MB.
inline constexpr int64_t kMaxDataFileBytes = int64_t{4} << 30;  // 4 GiB

enum class InputKind { kConfig, kData };

// The byte limit of `kind`.
int64_t max_input_bytes(InputKind kind);

// Why an input could not be opened or read.
struct InputProblem {
  bool missing = false;  // the path names nothing (ENOENT or ENOTDIR): callers may say "not found"
  std::string reason;    // e.g. "cannot open: Permission denied", "not a regular file (a
                         // character device)", "17825792 bytes, over the 16 MiB limit of
                         // configuration files"
};

// Why `path` cannot be read as an input of `kind`, or std::nullopt when it is a regular file
// within the limit. For paths that a configuration names and a later step reads. Never throws.
std::optional<InputProblem> input_file_problem(const std::string& path, InputKind kind);

// A regular input file of bounded size, open for reading.
class InputFile {
 public:
  // Opens `path` (never blocking on a FIFO). ok() says whether it is a regular file within
  // `kind`'s limit; problem() says why not.
  InputFile(const std::string& path, InputKind kind);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  bool ok() const { return !problem_; }
  // Set when !ok(), and after a read that failed or passed the limit.
  const std::optional<InputProblem>& problem() const { return problem_; }

  // The whole file; std::nullopt (problem() says why) when reading failed or passed the limit.
  // Requires ok().
  std::optional<std::string> read_all();
  // The file as a stream, ending at the limit (problem() then says so). Requires ok().
  std::istream& stream();

 private:
  class Buffer;
  // Up to `size` more bytes into `out`: 0 at the end, -1 (problem() set) on a read error or past
  // the limit.
  int64_t read_some(char* out, size_t size);

  std::string path_;
  InputKind kind_;
  int64_t max_bytes_;
  int fd_ = -1;
  int64_t size_hint_ = 0;  // stat()'s size: 0 for files that do not report it
  int64_t bytes_read_ = 0;
  std::optional<InputProblem> problem_;
  std::unique_ptr<Buffer> buffer_;
  std::unique_ptr<std::istream> stream_;
};

}  // namespace moesim
