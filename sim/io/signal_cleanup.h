// What a signal leaves behind (docs/outputs.md, "Interrupted commands"): SIGTERM, SIGINT or SIGHUP
// during a command removes the temporaries of its outputs and the lock files it created, says so
// on stderr in one line, and ends the process by that signal (exit status 128 + signal in a
// shell). The signals are blocked in every thread and taken by one thread in sigwait(2), so the
// clean-up runs as ordinary code, not in a handler; files are created and renamed into place under
// the registry's lock, so a signal never finds a file created and not yet registered, or removes
// one being renamed. Journals that --resume continues are kept and named in the message.
// The registry is process-wide by necessity (one process, one set of signal dispositions); the
// command line installs the clean-up, library users (the Python module) need not.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace moesim::sim::io {

// What the clean-up does with a registered path.
enum class OnSignal {
  kRemove,         // a temporary or a lock file: unlinked
  kKeepForResume,  // a journal: kept, and named in the message as what --resume continues
};

// A path registered with the clean-up while this object holds it. Move-only.
class SignalPath {
 public:
  SignalPath() = default;
  ~SignalPath();
  SignalPath(SignalPath&& other) noexcept;
  SignalPath& operator=(SignalPath&& other) noexcept;
  SignalPath(const SignalPath&) = delete;
  SignalPath& operator=(const SignalPath&) = delete;

  // Registers `path` and runs `act` (typically the open(2) that creates it) under the registry's
  // lock. When `act` returns false nothing stays registered and add() returns false. Precondition:
  // nothing registered by this object.
  bool add(const std::string& path, OnSignal on_signal, const std::function<bool()>& act = {});
  // Runs `act` (a rename(2) of the temporary into place, its unlink(2)) under the registry's lock,
  // then unregisters. Nothing happens when nothing is registered.
  void release(const std::function<void()>& act = {});
  bool registered() const { return id_ != 0; }

 private:
  uint64_t id_ = 0;
};

// Installs the clean-up for SIGTERM, SIGINT and SIGHUP (those not ignored at start: nohup's SIGHUP,
// a background job's SIGINT stay ignored): blocks them in the calling thread, which must be the
// only one (threads started later inherit the mask), and starts the thread that waits for them.
// On a signal it unlinks every kRemove path, writes one line to stderr
//   PROGRAM: stopped by SIGTERM: removed N temporary files[; PATH keeps the finished work
//   (--resume continues)]
// and ends the process by that signal. The mask survives exec(2): a command that executes another
// program must not install it. Call at most once.
void install_signal_cleanup(const char* program);

// Paths registered now.
int64_t num_signal_paths();

}  // namespace moesim::sim::io
