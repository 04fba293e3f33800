#include "apps/moesim/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

namespace moesim::cli {

namespace {

constexpr int kBarWidth = 24;
constexpr double kMinLineGapS = 1.0;  // forced on a file or pipe: at most one line a second

double steady_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string format_wall_duration(double seconds) {
  char buf[64];
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.*f s", seconds < 10 ? 1 : 0, seconds);
  } else if (seconds < 3600) {
    const auto s = static_cast<int64_t>(std::lround(seconds));
    std::snprintf(buf, sizeof buf, "%lld min %02lld s", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    const auto m = static_cast<int64_t>(std::lround(seconds / 60));
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", static_cast<long long>(m / 60),
                  static_cast<long long>(m % 60));
  }
  return buf;
}

Progress::Progress(std::string label, std::string unit, bool enabled, bool terminal, Clock clock,
                   std::FILE* out)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      enabled_(enabled),
      terminal_(terminal),
      clock_(clock ? std::move(clock) : Clock(steady_seconds)),
      out_(out != nullptr ? out : stderr) {
  if (enabled_) start_s_ = clock_();
}

bool Progress::wanted(bool asked) { return asked || isatty(fileno(stderr)) != 0; }

Progress Progress::for_stderr(std::string label, std::string unit, bool asked) {
  return Progress(std::move(label), std::move(unit), wanted(asked), isatty(fileno(stderr)) != 0);
}

std::string Progress::line(int64_t done, int64_t total, double elapsed_s) const {
  const int filled = total > 0
                         ? static_cast<int>(kBarWidth * std::clamp<int64_t>(done, 0, total) / total)
                         : kBarWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  std::string out = label_ + " [" + bar + "] " + std::to_string(done) + "/" +
                    std::to_string(total) + " " + unit_ + ", " + format_wall_duration(elapsed_s) +
                    " elapsed";
  if (done >= total) return out + ", done";
  const int64_t done_here = done - num_resumed_;
  if (done_here <= 0 || elapsed_s <= 0) return out + ", time left unknown yet";
  const double left_s =
      elapsed_s / static_cast<double>(done_here) * static_cast<double>(total - done);
  return out + ", about " + format_wall_duration(left_s) + " left";
}

void Progress::update(int64_t done, int64_t total) {
  if (!enabled_) return;
  const double now_s = clock_();
  const bool last = done >= total;
  if (!terminal_ && !last && last_print_s_ >= 0 && now_s - last_print_s_ < kMinLineGapS) return;
  last_print_s_ = now_s;
  std::string text = line(done, total, now_s - start_s_);
  if (terminal_) {
    // Pad over a longer previous line, then return to the line's start.
    const size_t width = text.size();
    if (width < last_width_) text.append(last_width_ - width, ' ');
    last_width_ = width;
    std::fprintf(out_, "\r%s%s", text.c_str(), last ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

std::function<void(int64_t, int64_t)> Progress::callback() {
  if (!enabled_) return {};
  return [this](int64_t done, int64_t total) { update(done, total); };
}

}  // namespace moesim::cli
