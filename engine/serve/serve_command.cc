#include "engine/serve/serve_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/input_error.h"
#include "engine/replay_plan.h"
#include "engine/serve/request_trace.h"
#include "engine/serve/serve_loop.h"
#include "engine/shape_limits.h"
#include "moesim_version.h"

namespace moesim::engine::serve {

namespace {

// A file written under PATH.tmp and renamed to PATH on commit().
class OutputFile {
 public:
  explicit OutputFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
    errno = 0;
    out_.open(tmp_);
    if (!out_) {
      throw InputError("cannot write " + tmp_ + ": " + std::strerror(errno != 0 ? errno : EIO));
    }
  }
  ~OutputFile() {
    if (!committed_) std::remove(tmp_.c_str());
  }
  std::ostream& stream() { return out_; }
  // False (the path and errno's reason printed) when a write or the rename failed.
  bool commit() {
    errno = 0;
    out_.close();
    if (!out_ || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      std::cerr << "moesim-engine: error writing " << path_ << ": "
                << std::strerror(errno != 0 ? errno : EIO) << "\n";
      return false;
    }
    committed_ = true;
    return true;
  }

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

// DIR is created when missing (its parent must exist); a file in its place is an error.
void make_output_dir(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) throw InputError("--out " + dir + ": not a directory");
    return;
  }
  if (mkdir(dir.c_str(), 0777) != 0) {
    throw InputError("cannot create " + dir + ": " + std::strerror(errno));
  }
}

// Nearest-rank percentile of non-empty `v` (sorted in place).
double percentile(std::vector<double>& v, double p) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

nlohmann::ordered_json percentiles_json(std::vector<double> v) {
  nlohmann::ordered_json j;
  j["count"] = v.size();
  if (v.empty()) return j;
  for (double p : {50.0, 90.0, 99.0}) {
    j["p" + std::to_string(static_cast<int>(p))] = percentile(v, p);
  }
  return j;
}

// The deployment the executors build from: the header's model, replicas and placement.
StepTrace deployment_of(const RequestTrace& t) {
  StepTrace d;
  d.file = t.file;
  d.moesim_version = t.header.moesim_version;
  d.scenario = t.header.scenario;
  d.seed = t.header.seed;
  d.overlap = t.header.overlap;
  d.model = t.header.model;
  d.topology = t.header.topology;
  d.replicas = t.header.replicas;
  d.placements = {t.header.placement};
  return d;
}

}  // namespace

int run_serve_command(const EngineArgs& a, const CommandBackendFactory& make_backend,
                      std::ostream& out) {
  const RequestTrace trace = read_request_trace(a.trace_path);
  const StepTrace deployment = deployment_of(trace);
  ServeOptions o;
  o.layers = a.get("--layers", "all");
  o.expert_dtype = a.get("--expert-dtype", "");
  o.seed = static_cast<uint64_t>(int_flag(a, "--seed", 1, 0, INT64_MAX));
  if (const std::optional<double> s = positive_flag(a, "--max-wall-s", kMaxServeWallSeconds)) {
    o.max_wall_ns = static_cast<int64_t>(*s * 1e9);
  }
  const std::string backend_name = a.get("--backend", "cpu");
  const std::vector<std::string> unsupported = shape_limit_violations(
      deployment.model, backend_name, replay_dtypes(deployment.model.dtypes, o.expert_dtype));
  if (!unsupported.empty()) {
    std::string msg = a.trace_path + ": the " + backend_name +
                      " backend cannot run this model's shapes and dtypes:";
    for (const std::string& u : unsupported) msg += "\n  " + u;
    throw InputError(msg);
  }
  select_layers(o.layers, deployment.model);  // a bad --layers fails before any work

  ServeInput input;
  input.deployment = &deployment;
  input.scheduler = trace.scheduler_config();
  input.admission = trace.admission;
  input.expert_share = trace.expert_share;
  for (const TraceRequest& r : trace.requests) {
    ServedArrival s;
    s.arrival.request = ServeRequest{r.request_id, r.arrival_ns, r.prompt_tokens, r.output_tokens};
    s.arrival.session_id = r.session_id;
    s.turn_idx = std::max<int64_t>(r.turn_idx, 0);
    s.domain = r.domain;
    input.arrivals.push_back(std::move(s));
  }

  const std::string dir = a.get("--out", "");
  make_output_dir(dir);
  OutputFile steps(dir + "/steps.jsonl");
  const ServeResult result = serve_requests(
      input, o, [&](int, int num_ranks) { return make_backend(num_ranks); }, steps.stream());
  if (!steps.commit()) return 1;

  OutputFile requests(dir + "/requests.csv");
  write_requests_csv_header(requests.stream());
  int64_t completed = 0, rejected = 0, in_flight = 0;
  std::vector<double> ttft, tpot, e2e, queueing;
  for (const RequestRecord& r : result.requests) {
    write_requests_csv_row(requests.stream(), r);
    if (r.outcome == "completed") {
      ++completed;
      ttft.push_back(static_cast<double>(r.first_token_ns - r.arrival_ns) / 1e6);
      e2e.push_back(static_cast<double>(r.done_ns - r.arrival_ns) / 1e6);
      queueing.push_back(static_cast<double>(r.first_scheduled_ns - r.arrival_ns) / 1e6);
      if (r.generated_tokens >= 2) {
        tpot.push_back(static_cast<double>(r.done_ns - r.first_token_ns) / 1e6 /
                       static_cast<double>(r.generated_tokens - 1));
      }
    } else if (r.outcome == "rejected") {
      ++rejected;
    } else {
      ++in_flight;
    }
  }
  if (!requests.commit()) return 1;

  nlohmann::ordered_json s;
  s["schema"] = "moesim.serve_summary.v1";
  s["engine_version"] = MOESIM_VERSION;
  s["trace"] = a.trace_path;
  s["scenario"] = deployment.scenario;
  s["model"] = deployment.model.name;
  s["backend"] = result.backend;
  s["device"] = result.device;
  s["layers"] = o.layers;
  s["seed"] = o.seed;
  s["max_wall_s"] = static_cast<double>(o.max_wall_ns) / 1e9;
  s["wall_s"] = static_cast<double>(result.wall_ns) / 1e9;
  s["steps"] = result.num_steps;
  s["requests"] = {{"arrived", result.requests.size()},
                   {"completed", completed},
                   {"rejected", rejected},
                   {"in_flight", in_flight}};
  s["ttft_ms"] = percentiles_json(ttft);
  s["tpot_ms"] = percentiles_json(tpot);
  s["e2e_ms"] = percentiles_json(e2e);
  s["queueing_ms"] = percentiles_json(queueing);
  OutputFile summary(dir + "/summary.json");
  summary.stream() << s.dump(2) << "\n";
  if (!summary.commit()) return 1;

  out << "served " << result.requests.size() << " requests (" << completed << " completed, "
      << rejected << " rejected, " << in_flight << " in flight) in " << result.num_steps
      << " steps, " << static_cast<double>(result.wall_ns) / 1e9 << " s on " << result.backend
      << " (" << result.device << ") -> " << dir << "\n";
  return 0;
}

}  // namespace moesim::engine::serve
