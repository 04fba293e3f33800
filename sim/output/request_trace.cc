#include "sim/output/request_trace.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "sim/output/run_outputs.h"
#include "sim/policy/concurrency_cap.h"
#include "sim/policy/long_context_cap.h"
#include "sim/policy/policy_registry.h"
#include "sim/policy/queue_isolation.h"

namespace moesim::sim::output {
namespace {

using nlohmann::json;

constexpr size_t kBufferBytes = size_t{64} << 10;

const char* long_context_action_name(LongContextAction a) {
  switch (a) {
    case LongContextAction::kReject:
      return "reject";
    case LongContextAction::kSummarize:
      return "summarize";
    case LongContextAction::kRoute:
      return "route";
    case LongContextAction::kOffline:
      return "offline";
  }
  return "?";
}

// The admission policies the engine implements, with their resolved values, and the names of
// everything else the scenario runs that it cannot express.
void add_policies(const Scenario& sc, json& h) {
  json admission = json::object();
  json unsupported = json::array();
  for (const auto& p : make_policies(sc)) {
    if (const auto* cap = dynamic_cast<const ConcurrencyCapPolicy*>(p.get())) {
      const ConcurrencyCapParams& c = cap->params();
      admission["concurrency_cap"] = {
          {"max_seqs_per_replica", c.max_seqs_per_replica > 0 ? c.max_seqs_per_replica : -1},
          {"max_step_tokens_per_replica",
           c.max_step_tokens_per_replica > 0 ? c.max_step_tokens_per_replica : -1}};
    } else if (const auto* qi = dynamic_cast<const QueueIsolationPolicy*>(p.get())) {
      const QueueIsolationParams& q = qi->params();
      admission["queue_isolation"] = {{"long_threshold_tokens", q.long_threshold_tokens},
                                      {"isolate", q.isolate},
                                      {"short_pool", q.short_pool},
                                      {"long_pool", q.long_pool}};
    } else if (const auto* lc = dynamic_cast<const LongContextCapPolicy*>(p.get())) {
      const LongContextCapParams& l = lc->params();
      json j = {{"threshold_tokens", l.threshold_tokens},
                {"action", long_context_action_name(l.action)},
                {"short_pool", l.short_pool}};
      if (l.action == LongContextAction::kRoute || l.action == LongContextAction::kOffline) {
        j["pool"] = l.pool;
      }
      if (l.action == LongContextAction::kOffline) j["batch_interval_s"] = l.batch_interval_s;
      if (l.action == LongContextAction::kSummarize) {
        j["summary_tokens"] = l.summary_tokens;
        j["preprocess_tokens_per_s"] = l.preprocess_tokens_per_s;
      }
      admission["long_context_cap"] = j;
    } else {
      unsupported.push_back(std::string(p->name()));
    }
  }
  // Deployment features that change the serving loop beyond what the header describes.
  if (sc.deployment.prefill_replicas > 0) unsupported.push_back("pd_disaggregation");
  if (sc.speculative.enabled) unsupported.push_back("speculative");
  if (sc.kv_tiers.enabled) unsupported.push_back("kv_tiers");
  h["admission"] = admission;
  h["unsupported_policies"] = unsupported;
}

// Per MoE layer, each expert's share of the layer's selections (sums to 1; all 0 for a layer
// that routed nothing).
json expert_share_json(const RunOutput& out) {
  json layers = json::array();
  for (const std::vector<double>& row : out.expert_selections) {
    double sum = 0;
    for (double v : row) sum += v;
    json shares = json::array();
    for (double v : row) shares.push_back(sum > 0 ? v / sum : 0.0);
    layers.push_back(shares);
  }
  return layers;
}

}  // namespace

json request_trace_header_json(const Scenario& sc, const RunOutput& out, uint64_t seed) {
  json h = trace_header_json(kRequestTraceSchema, sc, out, seed);
  const SchedulerSpec& s = sc.scheduler;
  // One attention rank's pool: every GPU record of a rank carries its layout's pool size.
  const int64_t kv_blocks_per_rank = out.gpus.empty() ? 0 : out.gpus.front().num_kv_blocks;
  h["scheduler"] = {{"max_seqs", s.max_seqs},
                    {"max_batch_tokens_per_gpu", s.max_batch_tokens_per_gpu},
                    {"max_step_tokens", -1},
                    {"chunked_prefill", true},
                    {"kv_block_tokens", s.kv_block_tokens},
                    {"kv_blocks_per_rank", kv_blocks_per_rank},
                    {"preemption", "recompute"},
                    {"max_queued_requests", s.max_queued_requests},
                    {"max_context_tokens", sc.model->max_context_tokens},
                    {"prefix_caching", s.prefix_caching},
                    {"prefix_block_tokens", kPrefixBlockTokens}};
  h["router"] = router_policy_name(s.router);
  json pools = json::array();
  int32_t first = 0;
  for (const PoolSpec& p : sc.deployment.pools) {
    json replicas = json::array();
    for (int32_t r = first; r < first + p.num_replicas; ++r) replicas.push_back(r);
    pools.push_back({{"name", p.name}, {"replicas", replicas}});
    first += p.num_replicas;
  }
  h["pools"] = pools;
  add_policies(sc, h);
  h["routing"] = {{"expert_share", expert_share_json(out)}};
  h["slo"] = {{"ttft_ms", sc.slo.ttft_ms}, {"tpot_ms", sc.slo.tpot_ms}};
  h["duration_ns"] = from_seconds(sc.run.duration_s);
  return h;
}

json request_record_json(const Request& r, SimTime arrival_ns, bool with_prefix_blocks) {
  json j;
  j["record"] = "request";
  j["request_id"] = r.id.value;
  j["arrival_ns"] = arrival_ns;
  j["prompt_tokens"] = r.prompt_tokens;
  j["output_tokens"] = r.output_tokens;
  j["session_id"] = r.session.valid() ? r.session.value : -1;
  j["turn_idx"] = r.turn_idx;
  j["domain"] = std::string(domain_name(r.domain));
  if (with_prefix_blocks) j["prefix_blocks"] = r.prefix_block_hashes;
  return j;
}

RequestTraceWriter::RequestTraceWriter(const std::string& path, const Scenario& scenario,
                                       const std::string& option)
    : path_(path), scenario_(scenario) {
  io::check_output_file(path_, option);
  lock_.emplace(path_, option);
  // Beside the output where it is a file (the same file system the trace will fill); a device
  // or FIFO is written in place, so the spool goes to the temporary directory.
  std::error_code ec;
  const bool in_place =
      std::filesystem::exists(path_, ec) && !std::filesystem::is_regular_file(path_, ec);
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  const std::string dir = in_place         ? std::filesystem::temp_directory_path(ec).string()
                          : parent.empty() ? std::string(".")
                                           : parent.string();
  fd_ = io::open_unnamed_file(dir);
  if (fd_ < 0) fail("cannot make its spool file in " + dir, errno);
  buffer_.reserve(kBufferBytes);
}

RequestTraceWriter::~RequestTraceWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void RequestTraceWriter::fail(const std::string& what, int err) const {
  throw io::OutputError("cannot write " + path_ + ": " + what + ": " + std::strerror(err));
}

void RequestTraceWriter::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("spooling its request records", errno);
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

void RequestTraceWriter::add(const Request& request, SimTime arrival_ns) {
  buffer_ += request_record_json(request, arrival_ns, scenario_.scheduler.prefix_caching).dump();
  buffer_ += '\n';
  ++num_records_;
  if (buffer_.size() >= kBufferBytes) flush();
}

std::unique_ptr<io::AtomicFile> RequestTraceWriter::prepare(const RunOutput& out, uint64_t seed) {
  flush();
  if (::lseek(fd_, 0, SEEK_SET) < 0) fail("rewinding its spool", errno);
  auto file = std::make_unique<io::AtomicFile>(path_);
  std::ostream& os = file->stream();
  os << request_trace_header_json(scenario_, out, seed).dump() << '\n';
  std::vector<char> chunk(kBufferBytes);
  while (true) {
    const ssize_t n = ::read(fd_, chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("reading its spool", errno);
    }
    if (n == 0) break;
    os.write(chunk.data(), n);
  }
  file->prepare();  // reports the first failed write with the errno text
  return file;
}

}  // namespace moesim::sim::output
