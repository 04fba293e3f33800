#include "base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace moesim {
namespace {

std::string limit_text(InputKind kind) {
  return kind == InputKind::kConfig ? "the 16 MiB limit of configuration files"
                                    : "the 4 GiB limit of data files";
}

// "a directory", "a character device", ... for a stat mode that is not a regular file.
std::string file_type_text(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

InputProblem errno_problem(const char* what, int error) {
  return InputProblem{error == ENOENT || error == ENOTDIR,
                      std::string(what) + ": " + std::strerror(error)};
}

}  // namespace

int64_t max_input_bytes(InputKind kind) {
  return kind == InputKind::kConfig ? kMaxConfigFileBytes : kMaxDataFileBytes;
}

// Reads the file in chunks through InputFile::read_some, so that the stream ends at the limit.
class InputFile::Buffer : public std::streambuf {
 public:
  explicit Buffer(InputFile& file) : file_(file) {}

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int64_t n = file_.read_some(chunk_.data(), chunk_.size());
    if (n <= 0) return traits_type::eof();
    setg(chunk_.data(), chunk_.data(), chunk_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  InputFile& file_;
  std::array<char, 1 << 16> chunk_;
};

InputFile::InputFile(const std::string& path, InputKind kind)
    : path_(path), kind_(kind), max_bytes_(max_input_bytes(kind)) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
  do {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) {
    problem_ = errno_problem("cannot open", errno);
    return;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    problem_ = errno_problem("cannot read", errno);
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    problem_ = InputProblem{false, "not a regular file (" + file_type_text(st.st_mode) + ")"};
    return;
  }
  if (st.st_size > max_bytes_) {
    problem_ =
        InputProblem{false, std::to_string(st.st_size) + " bytes, larger than " + limit_text(kind)};
    return;
  }
  size_hint_ = st.st_size;
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t InputFile::read_some(char* out, size_t size) {
  if (problem_) return -1;
  for (;;) {
    const ssize_t n = ::read(fd_, out, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      problem_ = errno_problem("cannot read", errno);
      return -1;
    }
    bytes_read_ += n;
    if (bytes_read_ > max_bytes_) {
      problem_ = InputProblem{false, "larger than " + limit_text(kind_) + " (read past it)"};
      return -1;
    }
    return n;
  }
}

std::optional<std::string> InputFile::read_all() {
  std::string text;
  if (size_hint_ > 0) text.reserve(static_cast<size_t>(size_hint_));
  std::array<char, 1 << 16> chunk;
  for (;;) {
    const int64_t n = read_some(chunk.data(), chunk.size());
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(chunk.data(), static_cast<size_t>(n));
  }
}

std::istream& InputFile::stream() {
  if (!stream_) {
    buffer_ = std::make_unique<Buffer>(*this);
    stream_ = std::make_unique<std::istream>(buffer_.get());
  }
  return *stream_;
}

std::optional<InputProblem> input_file_problem(const std::string& path, InputKind kind) {
  const InputFile file(path, kind);
  return file.problem();
}

}  // namespace moesim
