// Progress of a long command on stderr: work done, elapsed wall time and an estimate of the time
// left, for sweep, search, compare replications, calibrate and prune.
//
// The estimate is the mean wall time per unit of work done so far by this process times the
// units left (units resumed from a journal are not counted: they took no time here). On a
// terminal the line is redrawn in place; forced on a file or pipe (--progress) every update is
// a line of its own, at most one a second besides the first and the last, so logs stay short.
// Wall time is read here, in the command layer, never inside sim/ (STYLE.md, principle 8).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace moesim::cli {

// "4.2 s", "3 min 05 s", "1 h 02 min": a duration for a human, from seconds (>= 0).
std::string format_wall_duration(double seconds);

class Progress {
 public:
  using Clock = std::function<double()>;  // seconds since an arbitrary epoch, non-decreasing

  // `label` starts the line ("sweep"), `unit` names the work ("runs"). Disabled, every call is
  // a no-op. `terminal`: redraw in place (stderr is a TTY) rather than one line per update.
  // `clock` defaults to the steady clock; `out` (not owned) to stderr.
  Progress(std::string label, std::string unit, bool enabled, bool terminal, Clock clock = {},
           std::FILE* out = nullptr);

  // Whether a command should draw progress: asked with --progress, or stderr is a terminal.
  static bool wanted(bool asked);
  // A Progress for stderr: enabled when wanted(asked), in-place when stderr is a terminal.
  static Progress for_stderr(std::string label, std::string unit, bool asked);

  bool enabled() const { return enabled_; }
  // Units already done before this process started (a resumed sweep): shown in the count, left
  // out of the rate.
  void set_resumed(int64_t num_resumed) { num_resumed_ = num_resumed; }
  // Reports `done` of `total` units (0 <= done <= total). The last call (done == total) ends the
  // line with the total elapsed time.
  void update(int64_t done, int64_t total);
  // The text of one update, without line control: "sweep [####....] 3/8 runs, 12 s elapsed,
  // about 20 s left". Exposed for tests.
  std::string line(int64_t done, int64_t total, double elapsed_s) const;
  // An adapter for the study functions' progress(num_done, num_total) callbacks; empty when
  // disabled. The Progress must outlive it.
  std::function<void(int64_t, int64_t)> callback();

 private:
  std::string label_;
  std::string unit_;
  bool enabled_;
  bool terminal_;
  Clock clock_;
  std::FILE* out_;
  double start_s_ = 0;
  double last_print_s_ = -1;
  int64_t num_resumed_ = 0;
  size_t last_width_ = 0;
};

}  // namespace moesim::cli
