#include "engine/options.h"

#include <algorithm>
#include <sstream>

#include "base/number_text.h"
#include "engine/timing.h"

namespace moesim::engine {
namespace {

const std::vector<std::string> kCommonFlags = {
    "--backend",          "--warmup",          "--repeats",   "--memory-limit-gib",
    "--peak-bf16-tflops", "--peak-fp8-tflops", "--peak-gbps", "--out"};
const std::vector<std::string> kReplayFlags = {
    "--gpus", "--layers", "--expert-dtype", "--max-steps",    "--seed",   "--ranks",
    "--rank", "--nranks", "--nccl-id-file", "--local-device", "--replica"};
// How replays time their ops (engine/timing.h).
const std::vector<std::string> kReplayTimingFlags = {"--estimator", "--max-wait-fraction",
                                                     "--retries", "--pin", "--interleave"};
const std::vector<std::string> kBenchFlags = {"--shapes", "--tokens", "--contexts"};
// serve takes these and no others.
const std::vector<std::string> kServeFlags = {"--backend",   "--memory-limit-gib", "--out",
                                              "--layers",    "--expert-dtype",     "--seed",
                                              "--max-wall-s"};

bool listed(const std::vector<std::string>& flags, const std::string& flag) {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

// An argument for a message: at most 100 characters.
std::string cut(const std::string& arg) {
  return arg.size() <= 100 ? arg : arg.substr(0, 100) + "... (cut)";
}

int64_t parse_int(const std::string& flag, const std::string& v, int64_t min_value,
                  int64_t max_value) {
  std::string reason;
  const std::optional<int64_t> x = parse_integer_text(v, &reason);
  if (!x) throw UsageError(flag + ": " + reason);
  if (*x < min_value)
    throw UsageError(flag + " " + v + ": must be >= " + std::to_string(min_value));
  if (*x > max_value)
    throw UsageError(flag + " " + v + ": must be <= " + std::to_string(max_value));
  return *x;
}

// Every numeric flag's value, in its domain (the values main.cc reads later, checked first).
void check_numbers(const EngineArgs& a) {
  int_flag(a, "--warmup", 1, 0, kMaxEngineRuns);
  int_flag(a, "--repeats", 3, 1, kMaxEngineRuns);
  positive_flag(a, "--memory-limit-gib", kMaxMemoryLimitGib);
  positive_flag(a, "--peak-bf16-tflops", kMaxPeakTflops);
  positive_flag(a, "--peak-fp8-tflops", kMaxPeakTflops);
  positive_flag(a, "--peak-gbps", kMaxPeakGbps);
  positive_flag(a, "--max-wall-s", kMaxServeWallSeconds);
  for (const char* gpus : {"--gpus", "--ranks"}) {
    if (a.has(gpus)) int_list_flag(a, gpus, "", 0, kMaxEngineGpus - 1);
  }
  int_flag(a, "--max-steps", 0, 0, INT64_MAX);
  int_flag(a, "--seed", 1, 0, INT64_MAX);
  int_flag(a, "--replica", 0, 0, kMaxEngineGpus - 1);
  int_flag(a, "--rank", 0, 0, kMaxEngineGpus - 1);
  int_flag(a, "--nranks", 1, 1, kMaxEngineGpus);
  int_flag(a, "--local-device", 0, 0, 1023);
  positive_flag(a, "--max-wait-fraction", kMaxWaitFraction);
  int_flag(a, "--retries", 0, 0, kMaxEngineRuns);
  if (a.has("--estimator") && !parse_estimator(a.get("--estimator", ""))) {
    throw UsageError("--estimator " + cut(a.get("--estimator", "")) +
                     ": expected min, median or trimmed_mean");
  }
  if (a.has("--interleave") && a.get("--interleave", "") != "on" &&
      a.get("--interleave", "") != "off") {
    throw UsageError("--interleave " + cut(a.get("--interleave", "")) + ": expected on or off");
  }
  if (a.has("--pin") && !parse_pin_mode(a.get("--pin", ""))) {
    throw UsageError("--pin " + cut(a.get("--pin", "")) + ": expected auto, on or off");
  }
  if (a.has("--tokens") || a.has("--contexts")) {
    const std::vector<int64_t> tokens = int_list_flag(a, "--tokens", "1", 1, kMaxBenchTokens);
    const std::vector<int64_t> contexts =
        int_list_flag(a, "--contexts", "0", 0, kMaxBenchContextTokens);
    const int64_t longest = *std::max_element(tokens.begin(), tokens.end()) +
                            *std::max_element(contexts.begin(), contexts.end());
    if (longest > kMaxBenchContextTokens) {
      throw UsageError("--tokens, --contexts: a token count plus a context length is " +
                       std::to_string(longest) + ", more than " +
                       std::to_string(kMaxBenchContextTokens) + " (int32, as in step traces)");
    }
  }
}

}  // namespace

std::string EngineArgs::get(const std::string& flag, const std::string& fallback) const {
  auto it = flags.find(flag);
  return it == flags.end() ? fallback : it->second;
}

EngineArgs parse_engine_args(const std::vector<std::string>& argv) {
  EngineArgs a;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      if (!listed(kCommonFlags, arg) && !listed(kReplayFlags, arg) &&
          !listed(kReplayTimingFlags, arg) && !listed(kBenchFlags, arg) &&
          !listed(kServeFlags, arg)) {
        throw UsageError("unknown option " + cut(arg));
      }
      if (i + 1 >= argv.size()) throw UsageError(arg + " needs a value");
      a.flags[arg] = argv[++i];
    } else if (a.command.empty()) {
      a.command = arg;
    } else if ((a.command == "replay" || a.command == "serve") && a.trace_path.empty()) {
      a.trace_path = arg;
    } else {
      throw UsageError("unexpected argument '" + cut(arg) + "'");
    }
  }
  if (a.command != "replay" && a.command != "bench" && a.command != "serve") {
    throw UsageError(a.command.empty() ? "missing command"
                                       : "unknown command '" + cut(a.command) + "'");
  }
  for (const auto& [flag, value] : a.flags) {
    if (a.command != "serve" && flag == "--max-wall-s") {
      throw UsageError(flag + " is a serve option");
    }
    if (a.command == "bench" && (listed(kReplayFlags, flag) || listed(kReplayTimingFlags, flag))) {
      throw UsageError(flag + " is a replay option");
    }
    if (a.command == "replay" && listed(kBenchFlags, flag)) {
      throw UsageError(flag + " is a bench option");
    }
    if (a.command == "serve" && !listed(kServeFlags, flag)) {
      throw UsageError(flag + " is not a serve option");
    }
  }
  if (a.command == "serve") {
    if (a.trace_path.empty()) throw UsageError("serve needs a REQUESTS.jsonl argument");
    if (!a.has("--out")) throw UsageError("serve needs --out DIR");
  }
  if (a.command == "replay") {
    if (a.trace_path.empty()) throw UsageError("replay needs a STEPS.jsonl argument");
    if (!a.has("--out")) throw UsageError("replay needs --out MEAS.jsonl");
    if (a.has("--gpus") && a.has("--ranks")) {
      throw UsageError("--gpus and --ranks are the same option; give one");
    }
  }
  if (a.has("--nccl-id-file") && a.get("--nccl-id-file", "").empty()) {
    throw UsageError("--nccl-id-file: empty path");
  }
  if (a.has("--out") && a.get("--out", "").empty()) throw UsageError("--out: empty path");
  check_numbers(a);
  return a;
}

int64_t int_flag(const EngineArgs& a, const std::string& flag, int64_t fallback, int64_t min_value,
                 int64_t max_value) {
  if (!a.has(flag)) return fallback;
  return parse_int(flag, a.get(flag, ""), min_value, max_value);
}

std::vector<int64_t> int_list_flag(const EngineArgs& a, const std::string& flag,
                                   const std::string& fallback, int64_t min_value,
                                   int64_t max_value) {
  std::vector<int64_t> out;
  std::stringstream ss(a.get(flag, fallback));
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_int(flag, item, min_value, max_value));
  if (out.empty()) throw UsageError(flag + ": empty list");
  return out;
}

std::optional<double> positive_flag(const EngineArgs& a, const std::string& flag,
                                    double max_value) {
  if (!a.has(flag)) return std::nullopt;
  const std::string v = a.get(flag, "");
  std::string reason;
  const std::optional<double> x = parse_number_text(v, &reason);
  if (!x) throw UsageError(flag + ": " + reason);
  if (!(*x > 0 && *x <= max_value)) {
    std::ostringstream os;
    os << flag << " " << v << ": expected a number > 0 and <= " << max_value;
    throw UsageError(os.str());
  }
  return x;
}

}  // namespace moesim::engine
