// Output files that never lie (docs/outputs.md, "Writing outputs"): output paths are checked
// before any work starts, every file is written to a temporary name beside it and renamed over
// the final name only when every write, the fsync and the close succeeded, an output directory
// (or a single file such as --record) is locked for one run at a time (output_locks.h), and a
// signal removes the temporaries (signal_cleanup.h).
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
#include <vector>

#include "sim/io/output_locks.h"
#include "sim/io/signal_cleanup.h"

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

// One output file being written. The constructor creates ".NAME.tmp.PID.N" in the final
// file's directory (mode 0666 less the umask), registered with the signal clean-up
// (signal_cleanup.h); stream() writes there; prepare() flushes, fsyncs and closes it; publish()
// renames it over `path` and fsyncs the directory; commit() does both. Preparing every file of a
// set before publishing any lets a failure (a full disk) leave the old set whole. A file it
// replaces keeps its permissions; a link to a regular file stays a link (its target is replaced).
// The first failed write is remembered (stream() then reports badbit) and reported by prepare().
// Destroying an unpublished file removes the temporary, so the final name keeps its old content,
// if any. When `path` exists and is not (a link to) a regular file, e.g. a device or a FIFO,
// there is no temporary: the bytes go straight to it, every write still checked. Throws
// OutputError naming `path` and the errno text when the temporary cannot be created or
// prepare() / publish() fails (the temporary is removed first).
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream();
  void prepare();
  void publish();
  void commit();
  const std::string& path() const { return path_; }
  // The temporary's path while unpublished ("" when writing in place or after publish()).
  const std::string& temp_path() const { return temp_path_; }
  // When a write to this file has failed: the order of that failure among the failed writes of
  // every file of the process (0 first); -1 while none failed. Tells which file a full disk
  // stopped first.
  int64_t failed_write_seq() const;

 private:
  class FdBuf;
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  std::unique_ptr<FdBuf> buf_;
  std::unique_ptr<std::ostream> os_;
  SignalPath temp_;
  bool prepared_ = false;
  bool done_ = false;
};

// Unlinks the output `path` when it is a regular file (not a link, a device or a FIFO, which are
// written in place). Throws OutputError "cannot remove PATH: REASON".
void remove_output_file(const std::string& path);

// Removes the temporaries ".NAME.tmp.*" that a killed process left in `dir`, for each NAME of
// `names` (every temporary when `names` is empty). Only for a directory whose outputs are written
// under a lock the caller holds (OutputDirLock): no live writer has such a temporary there.
void remove_stale_temporaries(const std::string& dir, const std::vector<std::string>& names);

// A file grown by complete records that survives a kill: a long sweep's CSV, resumed with
// --resume. The constructor opens `path` (created if absent) under an exclusive lock (a second
// writer is bad input, naming `option`) and changes nothing in it, so that the caller can read
// what it holds first; start(keep_bytes) keeps its first `keep_bytes` bytes (a record a kill cut
// short is dropped) and appends after them. Every flush of stream() writes and fsyncs what was
// written since, so after a kill the file holds every record flushed before it; a signal keeps it
// and names it (signal_cleanup.h). commit(final_path) renames it over final_path (a reader of
// final_path never sees half a file). A failed write, fsync or rename is OutputError.
class JournalFile {
 public:
  JournalFile(std::string path, const std::string& option);
  ~JournalFile();
  JournalFile(const JournalFile&) = delete;
  JournalFile& operator=(const JournalFile&) = delete;

  void start(int64_t keep_bytes);
  std::ostream& stream();
  // Throws OutputError "cannot write PATH: REASON" when a write or fsync has failed.
  void check() const;
  void commit(const std::string& final_path);
  const std::string& path() const { return path_; }

 private:
  class Buf;
  std::string path_;
  int fd_ = -1;
  std::unique_ptr<Buf> buf_;
  std::unique_ptr<std::ostream> os_;
  SignalPath kept_;
};

// Complete lines (ending in a newline) of the file at `path` after its first line: the finished
// records a journal holds. 0 when the file is absent.
int64_t num_journal_records(const std::string& path);

// A file with no name in directory `dir`, open for reading and writing (O_TMPFILE; where the file
// system lacks it, a temporary name unlinked before anything is written), so that no signal or
// kill leaves it behind: a spool. Returns the descriptor, or -1 with errno set.
int open_unnamed_file(const std::string& dir);

// Writes `path` atomically with what `fill` writes to the stream (AtomicFile + commit). An
// exception from `fill` propagates after the temporary is removed.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& fill);

// Copies the bytes of `source` (an input already read) to `path` atomically. Throws
// OutputError when `source` cannot be read or `path` cannot be written.
void copy_file_atomically(const std::string& source, const std::string& path);

// The same two, prepared and not yet published (AtomicFile::publish renames them into place), for
// a set of files that appear together.
std::unique_ptr<AtomicFile> prepared_file(const std::string& path,
                                          const std::function<void(std::ostream&)>& fill);
std::unique_ptr<AtomicFile> prepared_copy(const std::string& source, const std::string& path);

}  // namespace moesim::sim::io
