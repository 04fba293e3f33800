// POSIX I/O so that every failure has its errno: a stream buffer over a file descriptor that
// remembers the first failed write(2), then fsync(2), close(2) and rename(2), each checked.
// Temporaries and lock files are created, renamed and removed through signal_cleanup.h, so that a
// SIGTERM, SIGINT or SIGHUP removes them.
#include "sim/io/output_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <streambuf>

#include "base/input_file.h"
#include "sim/config/config_error.h"
#include "sim/io/path_text.h"

namespace moesim::sim::io {
namespace {

namespace fs = std::filesystem;

using detail::bad_path;
using detail::errno_text;
using detail::parent_dir;

// Keeps temporary names within NAME_MAX (255) however long the final name is.
std::string temp_name_for(const std::string& path) {
  static std::atomic<uint64_t> next_idx{0};
  std::string name = fs::path(path).filename().string().substr(0, 200);
  return (fs::path(parent_dir(path)) / ("." + name + ".tmp." + std::to_string(::getpid()) + "." +
                                        std::to_string(next_idx.fetch_add(1))))
      .string();
}

// fsync of a directory makes a rename durable; some file systems refuse it (EINVAL), and the
// file is already complete under its final name, so a failure here is not reported.
void sync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// write(2) until every byte is written (retrying EINTR); 0, or the errno of the failure.
int write_fully(int fd, const char* data, size_t num_bytes) {
  while (num_bytes > 0) {
    ssize_t n = ::write(fd, data, num_bytes);
    if (n < 0) {
      if (errno != EINTR) return errno;
      continue;
    }
    data += n;
    num_bytes -= static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

// A buffered stream buffer over a file descriptor it does not own. After the first failed
// write(2) it writes nothing more, error() returns that errno and failure_seq() its order among
// the failures of every file.
class AtomicFile::FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd) { setp(buffer_.data(), buffer_.data() + buffer_.size()); }
  int error() const { return error_; }
  int64_t failure_seq() const { return failure_seq_; }
  // Writes the buffered bytes; false after any failure.
  bool drain() {
    write_all(pbase(), static_cast<size_t>(pptr() - pbase()));
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return error_ == 0;
  }

 protected:
  int_type overflow(int_type ch) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (n > epptr() - pptr()) {
      if (!drain()) return 0;
      if (n >= static_cast<std::streamsize>(buffer_.size())) {
        write_all(s, static_cast<size_t>(n));
        return error_ == 0 ? n : 0;
      }
    }
    std::memcpy(pptr(), s, static_cast<size_t>(n));
    pbump(static_cast<int>(n));
    return n;
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  void write_all(const char* data, size_t num_bytes) {
    if (error_ != 0) return;
    error_ = write_fully(fd_, data, num_bytes);
    if (error_ != 0) failure_seq_ = next_failure_seq.fetch_add(1);
  }

  static inline std::atomic<int64_t> next_failure_seq{0};
  int fd_;
  int error_ = 0;
  int64_t failure_seq_ = -1;
  std::array<char, 1 << 16> buffer_;
};

// Unbuffered: every put goes to write(2); sync() fsyncs. After the first failure it writes
// nothing more and error() returns that errno.
class JournalFile::Buf : public std::streambuf {
 public:
  explicit Buf(int fd) : fd_(fd) {}
  int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    const char c = traits_type::to_char_type(ch);
    return write_all(&c, 1) ? ch : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    return write_all(s, static_cast<size_t>(n)) ? n : 0;
  }
  int sync() override {
    if (error_ == 0 && ::fsync(fd_) != 0) error_ = errno;
    return error_ == 0 ? 0 : -1;
  }

 private:
  bool write_all(const char* data, size_t num_bytes) {
    if (error_ == 0) error_ = write_fully(fd_, data, num_bytes);
    return error_ == 0;
  }

  int fd_;
  int error_ = 0;
};

JournalFile::JournalFile(std::string path, const std::string& option) : path_(std::move(path)) {
  int err = 0;
  kept_.add(path_, OnSignal::kKeepForResume, [&] {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    err = errno;
    return fd_ >= 0;
  });
  if (fd_ < 0) bad_path(path_, option, "cannot open: " + errno_text(err));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    err = errno;
    ::close(fd_);
    fd_ = -1;
    kept_.release();
    if (err == EWOULDBLOCK) bad_path(path_, option, "in use by another moesim run");
    bad_path(path_, option, "cannot lock: " + errno_text(err));
  }
}

void JournalFile::start(int64_t keep_bytes) {
  if (::ftruncate(fd_, keep_bytes) != 0 || ::lseek(fd_, keep_bytes, SEEK_SET) < 0) {
    throw OutputError("cannot write " + path_ + ": " + errno_text(errno));
  }
  buf_ = std::make_unique<Buf>(fd_);
  os_ = std::make_unique<std::ostream>(buf_.get());
}

JournalFile::~JournalFile() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays for --resume
}

std::ostream& JournalFile::stream() { return *os_; }

void JournalFile::check() const {
  if (buf_ && buf_->error() != 0) {
    throw OutputError("cannot write " + path_ + ": " + errno_text(buf_->error()));
  }
}

void JournalFile::commit(const std::string& final_path) {
  os_->flush();
  check();
  if (::fsync(fd_) != 0) throw OutputError("cannot write " + path_ + ": " + errno_text(errno));
  int err = 0;
  kept_.release([&] {
    if (::rename(path_.c_str(), final_path.c_str()) != 0) err = errno;
  });
  if (err != 0) throw OutputError("cannot write " + final_path + ": " + errno_text(err));
  ::close(fd_);
  fd_ = -1;
}

int64_t num_journal_records(const std::string& path) {
  // A regular file of bounded size only: a device named as the journal (/dev/zero) holds none.
  InputFile in(path, InputKind::kData);
  const std::optional<std::string> text = in.ok() ? in.read_all() : std::nullopt;
  if (!text) return 0;
  const auto num_lines = static_cast<int64_t>(std::count(text->begin(), text->end(), '\n'));
  return num_lines > 1 ? num_lines - 1 : 0;
}

void ensure_output_dir(const std::string& dir, const std::string& option) {
  if (dir.empty()) bad_path(dir, option, "empty directory name");
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) bad_path(dir, option, "exists and is not a directory");
  } else if (errno == ENOENT) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) bad_path(dir, option, "cannot create the directory: " + ec.message());
  } else {
    bad_path(dir, option, "cannot be a directory: " + errno_text(errno));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    bad_path(dir, option, "directory not writable: " + errno_text(errno));
  }
}

void check_output_file(const std::string& path, const std::string& option) {
  if (path.empty()) bad_path(path, option, "empty file name");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) bad_path(path, option, "is a directory");
    if (!S_ISREG(st.st_mode)) return;  // a device or FIFO, written in place
  } else if (errno != ENOENT) {
    bad_path(path, option, "cannot be a file: " + errno_text(errno));
  }
  const std::string parent = parent_dir(path);
  if (::stat(parent.c_str(), &st) != 0) {
    bad_path(path, option, "directory '" + parent + "': " + errno_text(errno));
  }
  if (!S_ISDIR(st.st_mode)) bad_path(path, option, "'" + parent + "' is not a directory");
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    bad_path(path, option, "directory '" + parent + "' not writable: " + errno_text(errno));
  }
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // A link to a regular file keeps being a link: the target is replaced.
  struct stat st {};
  bool in_place = false;
  bool replaces = false;
  if (::stat(path_.c_str(), &st) == 0) {
    in_place = !S_ISREG(st.st_mode);
    replaces = !in_place;
    std::error_code ec;
    if (!in_place && fs::is_symlink(path_, ec)) {
      fs::path target = fs::canonical(path_, ec);
      if (!ec) path_ = target.string();
    }
  }
  int fd = -1;
  int err = 0;
  if (in_place) {
    fd = ::open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    err = errno;
  } else {
    do {
      temp_path_ = temp_name_for(path_);
      // Created under the clean-up's lock: a signal finds it registered or not yet there.
      temp_.add(temp_path_, OnSignal::kRemove, [&] {
        fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        err = errno;
        return fd >= 0;
      });
    } while (fd < 0 && err == EEXIST);
    // The new bytes keep the permissions of the file they replace (best effort: metadata).
    if (fd >= 0 && replaces) ::fchmod(fd, st.st_mode & 07777);
  }
  if (fd < 0) {
    temp_path_.clear();
    done_ = true;
    throw OutputError("cannot write " + path_ + ": " + errno_text(err));
  }
  fd_ = fd;
  buf_ = std::make_unique<FdBuf>(fd);
  os_ = std::make_unique<std::ostream>(buf_.get());
}

AtomicFile::~AtomicFile() {
  if (done_) return;
  if (fd_ >= 0) ::close(fd_);
  temp_.release([&] { ::unlink(temp_path_.c_str()); });
}

std::ostream& AtomicFile::stream() { return *os_; }

int64_t AtomicFile::failed_write_seq() const { return buf_ ? buf_->failure_seq() : -1; }

void AtomicFile::prepare() {
  if (done_ || prepared_) return;
  prepared_ = true;
  int err = buf_->drain() ? 0 : buf_->error();
  if (err == 0 && os_->bad()) err = EIO;  // a writer left the stream bad without a failed write
  if (err == 0 && !temp_path_.empty() && ::fsync(fd_) != 0) err = errno;
  if (::close(fd_) != 0 && err == 0) err = errno;
  fd_ = -1;
  if (err != 0) {
    done_ = true;
    temp_.release([&] { ::unlink(temp_path_.c_str()); });
    temp_path_.clear();
    throw OutputError("cannot write " + path_ + ": " + errno_text(err));
  }
}

void AtomicFile::publish() {
  prepare();
  if (done_) return;
  done_ = true;
  if (temp_path_.empty()) return;  // written in place
  int err = 0;
  temp_.release([&] {
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
      err = errno;
      ::unlink(temp_path_.c_str());
    }
  });
  temp_path_.clear();
  if (err != 0) throw OutputError("cannot write " + path_ + ": " + errno_text(err));
  sync_dir(parent_dir(path_));
}

void AtomicFile::commit() { publish(); }

void remove_output_file(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw OutputError("cannot remove " + path + ": " + errno_text(errno));
  }
}

void remove_stale_temporaries(const std::string& dir, const std::vector<std::string>& names) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 2 || name[0] != '.' || name.find(".tmp.") == std::string::npos) continue;
    bool ours = names.empty();
    for (const std::string& n : names) {
      ours = ours || name.rfind("." + n.substr(0, 200) + ".tmp.", 0) == 0;
    }
    if (ours && e.is_regular_file(ec)) fs::remove(e.path(), ec);
  }
}

std::unique_ptr<AtomicFile> prepared_file(const std::string& path,
                                          const std::function<void(std::ostream&)>& fill) {
  auto file = std::make_unique<AtomicFile>(path);
  fill(file->stream());
  file->prepare();
  return file;
}

std::unique_ptr<AtomicFile> prepared_copy(const std::string& source, const std::string& path) {
  std::ifstream in(source, std::ios::binary);
  std::string bytes;
  if (in) bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in) throw OutputError("cannot read " + source + ": " + errno_text(errno));
  return prepared_file(path, [&](std::ostream& os) { os.write(bytes.data(), bytes.size()); });
}

int open_unnamed_file(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  // No O_TMPFILE on this file system: a named temporary, unlinked before anything is written.
  std::string name = (fs::path(dir) / ".moesim-spool-XXXXXX").string();
  const int named = ::mkostemp(name.data(), O_CLOEXEC);
  if (named >= 0) ::unlink(name.c_str());
  return named;
}

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& fill) {
  prepared_file(path, fill)->publish();
}

void copy_file_atomically(const std::string& source, const std::string& path) {
  prepared_copy(source, path)->publish();
}

}  // namespace moesim::sim::io
