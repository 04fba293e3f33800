// The registry of paths and the thread that waits for the signals. The thread takes the
// registry's lock and never releases it: from then on no output is created or renamed into place,
// and the process ends by the signal once the registered temporaries are gone.
#include "sim/io/signal_cleanup.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <thread>

#include "base/check.h"

namespace moesim::sim::io {
namespace {

struct Entry {
  std::string path;
  OnSignal on_signal;
};

struct Registry {
  std::mutex mutex;
  uint64_t next_id = 1;
  std::map<uint64_t, Entry> entries;  // by id: in registration order
};

// Never destroyed: the clean-up thread may hold the lock while the main thread returns.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
  }
  return "a signal";
}

[[noreturn]] void clean_up_and_die(int sig, const std::string& program) {
  Registry& r = registry();
  r.mutex.lock();  // never unlocked
  int64_t num_removed = 0;
  const std::string* kept = nullptr;
  for (const auto& [id, entry] : r.entries) {
    if (entry.on_signal == OnSignal::kRemove) {
      if (::unlink(entry.path.c_str()) == 0) ++num_removed;
    } else if (kept == nullptr) {
      kept = &entry.path;
    }
  }
  std::string line = program + ": stopped by " + signal_name(sig) + ": removed " +
                     std::to_string(num_removed) + " temporary file" +
                     (num_removed == 1 ? "" : "s");
  if (kept != nullptr) line += "; " + *kept + " keeps the finished work (--resume continues)";
  line += "\n";
  // write(2), not stdio: another thread may hold stderr's lock.
  for (size_t at = 0; at < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + at, line.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  ::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);  // not reached: the signal's default action ends the process
}

}  // namespace

SignalPath::~SignalPath() { release(); }

SignalPath::SignalPath(SignalPath&& other) noexcept : id_(other.id_) { other.id_ = 0; }

SignalPath& SignalPath::operator=(SignalPath&& other) noexcept {
  if (this != &other) {
    release();
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

bool SignalPath::add(const std::string& path, OnSignal on_signal,
                     const std::function<bool()>& act) {
  MOESIM_CHECK(id_ == 0, "SignalPath::add on an object that holds a path");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (act && !act()) return false;
  id_ = r.next_id++;
  r.entries.emplace(id_, Entry{path, on_signal});
  return true;
}

void SignalPath::release(const std::function<void()>& act) {
  if (id_ == 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (act) act();
  r.entries.erase(id_);
  id_ = 0;
}

void install_signal_cleanup(const char* program) {
  sigset_t set;
  sigemptyset(&set);
  bool any = false;
  for (int sig : kSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && (old.sa_flags & SA_SIGINFO) == 0 &&
        old.sa_handler == SIG_IGN) {
      continue;  // ignored by whoever started us (nohup, a background job): stays ignored
    }
    sigaddset(&set, sig);
    any = true;
  }
  if (!any) return;
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, name = std::string(program)] {
    int sig = 0;
    while (::sigwait(&set, &sig) != 0) {
    }
    clean_up_and_die(sig, name);
  }).detach();
}

int64_t num_signal_paths() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return static_cast<int64_t>(r.entries.size());
}

}  // namespace moesim::sim::io
