// flock(2) on lock files; a lock file its holder removes is checked to be the one named after the
// lock is taken (a lock taken on a file removed meanwhile is taken again on the new one).
#include "sim/io/output_locks.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "sim/config/config_error.h"
#include "sim/io/output_files.h"
#include "sim/io/path_text.h"

namespace moesim::sim::io {
namespace {

namespace fs = std::filesystem;

using detail::bad_path;
using detail::errno_text;
using detail::parent_dir;

}  // namespace

OutputDirLock::OutputDirLock(const std::string& dir, const std::string& option) : dir_(dir) {
  ensure_output_dir(dir, option);
  const std::string lock_path = (fs::path(dir) / kLockFileName).string();
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) bad_path(dir, option, "cannot open the lock file: " + errno_text(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      bad_path(dir, option, "in use by another moesim run (it holds " + lock_path + ")");
    }
    bad_path(dir, option, "cannot lock " + lock_path + ": " + errno_text(err));
  }
}

OutputDirLock::~OutputDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

OutputDirLock::OutputDirLock(OutputDirLock&& other) noexcept
    : dir_(std::move(other.dir_)), fd_(other.fd_) {
  other.fd_ = -1;
}

OutputFileLock::OutputFileLock(const std::string& path, const std::string& option) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return;  // a device, written in place
  const std::string name = fs::path(path).filename().string().substr(0, 200);
  const std::string lock_path =
      (fs::path(parent_dir(path)) / ("." + name + ".moesim.lock")).string();
  // The holder removes the lock file: a lock taken on a file removed meanwhile is taken again.
  for (;;) {
    int err = 0;
    registered_.add(lock_path, OnSignal::kRemove, [&] {
      fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
      err = errno;
      return fd_ >= 0;
    });
    if (fd_ < 0) {
      bad_path(path, option, "cannot create the lock file " + lock_path + ": " + errno_text(err));
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      registered_ = SignalPath();  // unregistered, the file left to its holder
      if (err == EWOULDBLOCK) {
        bad_path(path, option, "in use by another moesim run (it holds " + lock_path + ")");
      }
      bad_path(path, option, "cannot lock " + lock_path + ": " + errno_text(err));
    }
    struct stat held {
    }, named{};
    if (::fstat(fd_, &held) == 0 && ::stat(lock_path.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      break;
    }
    ::close(fd_);
    fd_ = -1;
    registered_ = SignalPath();
  }
  lock_path_ = lock_path;
}

OutputFileLock::~OutputFileLock() {
  if (fd_ < 0) return;
  registered_.release([&] { ::unlink(lock_path_.c_str()); });  // removed while still held
  ::close(fd_);
}

OutputFileLock::OutputFileLock(OutputFileLock&& other) noexcept
    : lock_path_(std::move(other.lock_path_)),
      fd_(other.fd_),
      registered_(std::move(other.registered_)) {
  other.fd_ = -1;
}

}  // namespace moesim::sim::io
