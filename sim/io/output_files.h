// Output files that never lie (docs/outputs.md, "Writing outputs"): output paths are checked
// before any work starts, every file is written to a temporary name beside it and renamed over
// the final name only when every write, the fsync and the close succeeded, and an output
// directory is locked for one run at a time.
//
// Errors: a path that cannot be an output (an existing non-directory given as a directory, a
// missing or unwritable parent, a directory held by another run) is bad input, ConfigError
// (exit 2) naming the path and the option. A write that fails once started (a full disk, a file
// size limit) is OutputError (exit 1) naming the path and the system's reason (strerror).
// This module does file I/O for the command line's edge; no simulation model uses it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>

namespace moesim::sim::io {

// A failed write of an output file; what() is one line "cannot write PATH: REASON".
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Exit code of a command whose output could not be written.
inline constexpr int kExitOutputFailed = 1;

// Makes `dir` an output directory: creates it and its missing parents; a no-op when it already
// is a directory. Throws ConfigError "DIR: OPTION: REASON" when it exists and is not a
// directory, cannot be created (the errno text), or is not writable.
void ensure_output_dir(const std::string& dir, const std::string& option);

// Checks that `path` can become an output file: not an existing directory, and its parent
// directory ("." when it has none) exists and is writable. An existing non-regular file (a
// device such as /dev/null, a FIFO) is accepted and is written in place. Throws ConfigError
// "PATH: OPTION: REASON" otherwise. Creates nothing.
void check_output_file(const std::string& path, const std::string& option);

// An output directory held by one process: ensure_output_dir, then an exclusive, non-blocking
// flock on DIR/.moesim.lock, released when this object is destroyed (the empty lock file
// stays). Throws ConfigError when another process holds the lock ("in use by another moesim
// run") or the lock file cannot be opened. Move-only.
class OutputDirLock {
 public:
  OutputDirLock(const std::string& dir, const std::string& option);
  ~OutputDirLock();
  OutputDirLock(OutputDirLock&& other) noexcept;
  OutputDirLock& operator=(OutputDirLock&&) = delete;
  OutputDirLock(const OutputDirLock&) = delete;
  OutputDirLock& operator=(const OutputDirLock&) = delete;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int fd_ = -1;
};

// Name of the lock file inside a locked output directory.
inline constexpr const char* kLockFileName = ".moesim.lock";

// One output file being written. The constructor creates ".NAME.tmp.PID.N" in the final
// file's directory (mode 0666 less the umask); stream() writes there; commit() flushes, fsyncs
// and closes it, renames it over `path` and fsyncs the directory. A file it replaces keeps its
// permissions; a link to a regular file stays a link (its target is replaced). The first
// failed write is remembered (stream() then reports badbit) and reported by commit().
// Destroying an uncommitted file removes the temporary, so the final name keeps its old
// content, if any. When `path` exists and is not (a link to) a regular file, e.g. a device or
// a FIFO, there is no temporary: the bytes go straight to it, every write still checked.
// Throws OutputError naming `path` and the errno text when the temporary cannot be created or
// commit() fails (the temporary is removed first).
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream();
  void commit();
  const std::string& path() const { return path_; }
  // The temporary's path while uncommitted ("" when writing in place or after commit).
  const std::string& temp_path() const { return temp_path_; }

 private:
  class FdBuf;
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  std::unique_ptr<FdBuf> buf_;
  std::unique_ptr<std::ostream> os_;
  bool done_ = false;
};

// A file grown by complete records that survives a kill: a long sweep's CSV, resumed with
// --resume. Opens `path` (created if absent) under an exclusive lock (a second writer is bad
// input, naming `option`), keeps its first `keep_bytes` bytes (a record a kill cut short is
// dropped) and appends after them. Every flush of stream() writes and fsyncs what was written
// since, so after a kill the file holds every record flushed before it. commit(final_path)
// renames it over final_path (a reader of final_path never sees half a file). A failed write,
// fsync or rename is OutputError.
class JournalFile {
 public:
  JournalFile(std::string path, int64_t keep_bytes, const std::string& option);
  ~JournalFile();
  JournalFile(const JournalFile&) = delete;
  JournalFile& operator=(const JournalFile&) = delete;

  std::ostream& stream();
  void commit(const std::string& final_path);
  const std::string& path() const { return path_; }

 private:
  class Buf;
  std::string path_;
  int fd_ = -1;
  std::unique_ptr<Buf> buf_;
  std::unique_ptr<std::ostream> os_;
};

// Writes `path` atomically with what `fill` writes to the stream (AtomicFile + commit). An
// exception from `fill` propagates after the temporary is removed.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& fill);

// Copies the bytes of `source` (an input already read) to `path` atomically. Throws
// OutputError when `source` cannot be read or `path` cannot be written.
void copy_file_atomically(const std::string& source, const std::string& path);

}  // namespace moesim::sim::io
