// Locks on outputs (docs/outputs.md, "Writing outputs"): one process at a time writes an output
// directory (`run --out`, `validate --out`: a lock file that stays in it) or a single output
// file (`run --record`: a lock file beside it, removed by its holder, so that nothing is left
// next to the user's file). Both are exclusive, non-blocking flock(2)s: a second command is
// refused at once, before any work, as bad input.
#pragma once

#include <string>

#include "sim/io/signal_cleanup.h"

namespace moesim::sim::io {

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

// A single output file held by one process (`run --record FILE`): an exclusive, non-blocking
// flock on ".NAME.moesim.lock" beside it, created for the purpose and removed when this object is
// destroyed (or by the signal clean-up). A path that exists and is not a regular file (a device,
// a FIFO) is not locked. Throws ConfigError "PATH: OPTION: in use by another moesim run (it holds
// LOCK)" while another process holds it, or when the lock file cannot be created. Move-only.
class OutputFileLock {
 public:
  OutputFileLock(const std::string& path, const std::string& option);
  ~OutputFileLock();
  OutputFileLock(OutputFileLock&& other) noexcept;
  OutputFileLock& operator=(OutputFileLock&&) = delete;
  OutputFileLock(const OutputFileLock&) = delete;
  OutputFileLock& operator=(const OutputFileLock&) = delete;

  // The lock file ("" when the path is not locked).
  const std::string& lock_path() const { return lock_path_; }

 private:
  std::string lock_path_;
  int fd_ = -1;
  SignalPath registered_;
};

}  // namespace moesim::sim::io
