// Request-trace reader: the shared header fields, the serving sections of the header, then one
// request record per line.
#include "engine/serve/request_trace.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "engine/input_error.h"
#include "engine/trace_json.h"

namespace moesim::engine::serve {

using namespace trace_json;  // NOLINT(build/namespaces): the field readers

std::vector<int64_t> RequestTrace::ranks_per_replica() const {
  std::vector<int64_t> ranks;
  for (const TraceReplica& r : header.replicas) {
    const int64_t gpus = static_cast<int64_t>(r.gpus.size());
    ranks.push_back(r.attention == "tp" ? gpus / r.attention_tp : gpus);
  }
  return ranks;
}

SchedulerConfig RequestTrace::scheduler_config() const {
  SchedulerConfig c;
  c.num_ranks = 1;
  c.max_seqs = scheduler.max_seqs;
  c.max_batch_tokens_per_gpu = scheduler.max_batch_tokens_per_gpu;
  c.max_step_tokens = scheduler.max_step_tokens;
  c.chunked_prefill = scheduler.chunked_prefill;
  c.kv_block_tokens = scheduler.kv_block_tokens;
  c.kv_blocks_per_rank = scheduler.kv_blocks_per_rank;
  c.max_queued_requests = scheduler.max_queued_requests;
  c.max_context_tokens = scheduler.max_context_tokens;
  return c;
}

Arrival arrival_of(const TraceRequest& request) {
  return Arrival{ServeRequest{request.request_id, request.arrival_ns, request.prompt_tokens,
                              request.output_tokens},
                 request.session_id};
}

namespace {

constexpr int64_t kMaxTokens = int64_t{1} << 40;  // far above any context, far from int64 sums

double as_double(const Where& w, const json& v, const std::string& field) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) {
    w.fail(field, "expected a finite number, got " + describe(v));
  }
  return v.get<double>();
}

// An int field that is -1 ("no limit") or >= 1.
int64_t limit_field(const Where& w, const json& obj, const std::string& path,
                    const std::string& key) {
  const int64_t x = int_field(w, obj, path, key, -1);
  if (x == 0) w.fail(join(path, key), "must be -1 (no limit) or >= 1, got 0");
  return x;
}

TraceSchedulerSettings parse_scheduler(const Where& w, const json& j) {
  const std::string p = "scheduler";
  const json& s = object_field(w, j, "", p);
  no_unknown_keys(w, s, p,
                  {"max_seqs", "max_batch_tokens_per_gpu", "max_step_tokens", "chunked_prefill",
                   "kv_block_tokens", "kv_blocks_per_rank", "preemption", "max_queued_requests",
                   "max_context_tokens", "prefix_caching", "prefix_block_tokens"});
  TraceSchedulerSettings t;
  t.max_seqs = int_field(w, s, p, "max_seqs", 1);
  t.max_batch_tokens_per_gpu = int_field(w, s, p, "max_batch_tokens_per_gpu", 1, kMaxTokens);
  t.max_step_tokens = limit_field(w, s, p, "max_step_tokens");
  t.chunked_prefill = bool_field(w, s, p, "chunked_prefill");
  t.kv_block_tokens = int_field(w, s, p, "kv_block_tokens", 1, kMaxTokens);
  t.kv_blocks_per_rank = int_field(w, s, p, "kv_blocks_per_rank", 1, kMaxTokens);
  t.preemption = string_field(w, s, p, "preemption");
  if (t.preemption != "recompute") {
    w.fail(join(p, "preemption"),
           "unsupported preemption mode '" + t.preemption + "' (valid: recompute)");
  }
  t.max_queued_requests = limit_field(w, s, p, "max_queued_requests");
  t.max_context_tokens = int_field(w, s, p, "max_context_tokens", 1);
  t.prefix_caching = bool_field(w, s, p, "prefix_caching");
  t.prefix_block_tokens = int_field_or(w, s, p, "prefix_block_tokens", 1, 512, kMaxTokens);
  return t;
}

std::vector<PoolSpec> parse_pools(const Where& w, const json& j, int64_t num_replicas) {
  std::vector<PoolSpec> pools;
  const json& a = array_field(w, j, "", "pools");
  std::set<std::string> names;
  std::set<int64_t> used;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string p = index("pools", i);
    if (!a[i].is_object()) w.fail(p, "expected an object");
    no_unknown_keys(w, a[i], p, {"name", "replicas"});
    PoolSpec pool;
    pool.name = string_field(w, a[i], p, "name");
    if (pool.name.empty()) w.fail(join(p, "name"), "must not be empty");
    if (!names.insert(pool.name).second) {
      w.fail(join(p, "name"), "pool '" + pool.name + "' declared twice");
    }
    const json& replicas = array_field(w, a[i], p, "replicas");
    if (replicas.empty()) w.fail(join(p, "replicas"), "must list at least one replica");
    for (size_t k = 0; k < replicas.size(); ++k) {
      const std::string rp = index(join(p, "replicas"), k);
      const int64_t r = as_int(w, replicas[k], rp, 0, num_replicas - 1);
      if (!used.insert(r).second) w.fail(rp, "replica " + std::to_string(r) + " is in two pools");
      pool.replicas.push_back(r);
    }
    pools.push_back(std::move(pool));
  }
  return pools;
}

// A pool name at obj[key] that `pools` declares.
std::string pool_field(const Where& w, const json& obj, const std::string& path,
                       const std::string& key, const std::vector<PoolSpec>& pools) {
  const std::string name = string_field(w, obj, path, key);
  for (const PoolSpec& pool : pools) {
    if (pool.name == name) return name;
  }
  w.fail(join(path, key), "pool '" + name + "' is not declared in pools");
}

void parse_admission(const Where& w, const json& j, AdmissionConfig& config) {
  const json& a = object_field(w, j, "", "admission");
  no_unknown_keys(w, a, "admission", {"concurrency_cap", "queue_isolation", "long_context_cap"});
  if (a.contains("concurrency_cap")) {
    const std::string p = "admission.concurrency_cap";
    const json& c = object_field(w, a, "admission", "concurrency_cap");
    no_unknown_keys(w, c, p, {"max_seqs_per_replica", "max_step_tokens_per_replica"});
    ConcurrencyCap cap;
    // -1 (or 0): the table leaves the limit unset and the scheduler's own applies.
    cap.max_seqs_per_replica = int_field(w, c, p, "max_seqs_per_replica", -1);
    cap.max_step_tokens_per_replica = int_field(w, c, p, "max_step_tokens_per_replica", -1);
    if (cap.max_seqs_per_replica <= 0 && cap.max_step_tokens_per_replica <= 0) {
      w.fail(p, "at least one of max_seqs_per_replica, max_step_tokens_per_replica must be > 0");
    }
    config.concurrency_cap = cap;
  }
  if (a.contains("queue_isolation")) {
    const std::string p = "admission.queue_isolation";
    const json& q = object_field(w, a, "admission", "queue_isolation");
    no_unknown_keys(w, q, p, {"long_threshold_tokens", "isolate", "short_pool", "long_pool"});
    QueueIsolation iso;
    iso.long_threshold_tokens = int_field(w, q, p, "long_threshold_tokens", 1);
    iso.isolate = bool_field(w, q, p, "isolate");
    // Without isolation the pools route nothing (the writer gives "").
    if (iso.isolate) {
      iso.short_pool = pool_field(w, q, p, "short_pool", config.pools);
      iso.long_pool = pool_field(w, q, p, "long_pool", config.pools);
    } else {
      for (const char* key : {"short_pool", "long_pool"}) {
        if (q.contains(key)) string_field(w, q, p, key);
      }
    }
    if (iso.isolate && iso.short_pool == iso.long_pool) {
      w.fail(join(p, "long_pool"), "must differ from short_pool ('" + iso.short_pool + "')");
    }
    config.queue_isolation = iso;
  }
  if (a.contains("long_context_cap")) {
    const std::string p = "admission.long_context_cap";
    const json& l = object_field(w, a, "admission", "long_context_cap");
    LongContextCap cap;
    try {
      cap.action = parse_long_context_action(string_field(w, l, p, "action"));
    } catch (const std::invalid_argument& e) {
      w.fail(join(p, "action"), e.what());
    }
    no_unknown_keys(w, l, p, {"threshold_tokens", "action", "pool", "short_pool"});
    cap.threshold_tokens = int_field(w, l, p, "threshold_tokens", 1);
    if (cap.action == LongContextAction::kRoute) {
      cap.pool = pool_field(w, l, p, "pool", config.pools);
    } else if (l.contains("pool")) {
      w.fail(join(p, "pool"), "only for action 'route'");
    }
    if (l.contains("short_pool")) cap.short_pool = pool_field(w, l, p, "short_pool", config.pools);
    config.long_context_cap = cap;
  }
}

std::vector<std::vector<double>> parse_expert_share(const Where& w, const json& j,
                                                    const TraceModel& model) {
  const json& r = object_field(w, j, "", "routing");
  no_unknown_keys(w, r, "routing", {"expert_share"});
  const json& shares = array_field(w, r, "routing", "expert_share");
  int64_t num_moe_layers = 0;
  for (const TraceLayer& l : model.layers) num_moe_layers += l.is_moe ? 1 : 0;
  const std::string p = "routing.expert_share";
  if (static_cast<int64_t>(shares.size()) != num_moe_layers) {
    w.fail(p, "has " + std::to_string(shares.size()) + " rows, the model has " +
                  std::to_string(num_moe_layers) + " MoE layers");
  }
  const int64_t num_experts = num_routed_experts(model);
  std::vector<std::vector<double>> out;
  for (size_t m = 0; m < shares.size(); ++m) {
    const std::string rp = index(p, m);
    if (!shares[m].is_array() || static_cast<int64_t>(shares[m].size()) != num_experts) {
      w.fail(rp, "expected " + std::to_string(num_experts) + " shares (one per routed expert)");
    }
    std::vector<double> row;
    double sum = 0;
    for (size_t e = 0; e < shares[m].size(); ++e) {
      const double x = as_double(w, shares[m][e], index(rp, e));
      if (x < 0 || x > 1) w.fail(index(rp, e), "must be in [0, 1], got " + describe(shares[m][e]));
      row.push_back(x);
      sum += x;
    }
    if (std::abs(sum - 1.0) > 1e-3) w.fail(rp, "shares sum to " + std::to_string(sum) + ", not 1");
    out.push_back(std::move(row));
  }
  return out;
}

void parse_slo(const Where& w, const json& j, RequestTrace& trace) {
  const json& s = object_field(w, j, "", "slo");
  no_unknown_keys(w, s, "slo", {"ttft_ms", "tpot_ms"});
  for (const char* key : {"ttft_ms", "tpot_ms"}) {
    if (!s.contains(key)) continue;
    const double x = as_double(w, s[key], join("slo", key));
    if (x <= 0) w.fail(join("slo", key), "must be > 0, got " + describe(s[key]));
    (std::string(key) == "ttft_ms" ? trace.slo_ttft_ms : trace.slo_tpot_ms) = x;
  }
}

void parse_header(const Where& w, const json& j, RequestTrace& trace) {
  trace.header = parse_trace_header(w, j, kRequestTraceSchema);
  no_unknown_keys(w, j, "",
                  {"record", "schema", "moesim_version", "scenario", "seed", "overlap", "comm_sms",
                   "model", "topology", "replicas", "placement", "scheduler", "router", "pools",
                   "admission", "routing", "slo", "duration_ns", "unsupported_policies"});
  const json& unsupported = array_field(w, j, "", "unsupported_policies");
  std::string names;
  for (size_t i = 0; i < unsupported.size(); ++i) {
    if (!unsupported[i].is_string()) w.fail(index("unsupported_policies", i), "expected a string");
    names += (names.empty() ? "" : ", ") + unsupported[i].get<std::string>();
  }
  if (!names.empty()) {
    w.fail("unsupported_policies", "the engine cannot run these policies: " + names);
  }
  for (size_t i = 0; i < trace.header.replicas.size(); ++i) {
    const TraceReplica& r = trace.header.replicas[i];
    const std::string rp = index("replicas", i);
    if (r.replica_idx != static_cast<int64_t>(i)) {
      w.fail(join(rp, "replica"), "replicas must be listed in order 0, 1, ...");
    }
    if (r.gpus.empty()) w.fail(join(rp, "gpus"), "must list at least one GPU");
    if (r.attention != "dp" && r.attention != "tp") {
      w.fail(join(rp, "attention"), "unknown attention '" + r.attention + "' (valid: dp, tp)");
    }
    if (r.gpus.size() % r.attention_tp != 0 || (r.attention == "dp" && r.attention_tp != 1)) {
      w.fail(join(rp, "attention_tp"), "must be 1 with dp and divide the replica's GPUs with tp");
    }
  }
  trace.scheduler = parse_scheduler(w, j);
  try {
    trace.admission.router = parse_router_policy(string_field(w, j, "", "router"));
  } catch (const std::invalid_argument& e) {
    w.fail("router", e.what());
  }
  trace.admission.pools = parse_pools(w, j, static_cast<int64_t>(trace.header.replicas.size()));
  parse_admission(w, j, trace.admission);
  trace.expert_share = parse_expert_share(w, j, trace.header.model);
  parse_slo(w, j, trace);
  trace.duration_ns = int_field(w, j, "", "duration_ns", 1);
  // Whatever ServeFront refuses beyond the checks above (e.g. a concurrency cap on a bad value).
  try {
    ServeFront front(trace.admission, trace.scheduler_config(), trace.ranks_per_replica());
  } catch (const std::invalid_argument& e) {
    w.fail("admission", e.what());
  }
}

TraceRequest parse_request(const Where& w, const json& j, int64_t prefix_block_tokens) {
  no_unknown_keys(w, j, "",
                  {"record", "request_id", "arrival_ns", "prompt_tokens", "output_tokens",
                   "session_id", "turn_idx", "domain", "prefix_blocks"});
  TraceRequest r;
  r.line = w.line;
  r.request_id = int_field(w, j, "", "request_id", 0);
  r.arrival_ns = int_field(w, j, "", "arrival_ns", 0);
  r.prompt_tokens = int_field(w, j, "", "prompt_tokens", 1);
  r.output_tokens = int_field(w, j, "", "output_tokens", 1);
  r.session_id = int_field_or(w, j, "", "session_id", -1, -1);
  r.turn_idx = int_field_or(w, j, "", "turn_idx", 0, 0);
  if (j.contains("domain")) {
    r.domain = string_field(w, j, "", "domain");
    if (r.domain != "code" && r.domain != "math" && r.domain != "chat" &&
        r.domain != "multilingual") {
      w.fail("domain", "unknown domain '" + r.domain + "' (valid: code, math, chat, multilingual)");
    }
  }
  if (j.contains("prefix_blocks")) {
    const json& blocks = array_field(w, j, "", "prefix_blocks");
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (!blocks[i].is_number_unsigned()) {
        w.fail(index("prefix_blocks", i),
               "expected an unsigned integer hash, got " + describe(blocks[i]));
      }
      r.prefix_blocks.push_back(blocks[i].get<uint64_t>());
    }
    const int64_t expected = r.prompt_tokens / prefix_block_tokens +
                             (r.prompt_tokens % prefix_block_tokens != 0 ? 1 : 0);
    if (static_cast<int64_t>(r.prefix_blocks.size()) != expected) {
      w.fail("prefix_blocks", "has " + std::to_string(r.prefix_blocks.size()) +
                                  " hashes, expected ceil(prompt_tokens / " +
                                  std::to_string(prefix_block_tokens) +
                                  ") = " + std::to_string(expected));
    }
  }
  return r;
}

}  // namespace

RequestTrace parse_request_trace(std::string_view text, const std::string& file_name) {
  RequestTrace trace;
  trace.file = file_name;
  std::istringstream in{std::string(text)};
  std::string line_text;
  int64_t line = 0;
  bool have_header = false;
  std::set<int64_t> ids;
  while (std::getline(in, line_text)) {
    ++line;
    if (line_text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Where w{file_name, line};
    const json j = parse_record(w, line_text);
    if (!have_header) {
      parse_header(w, j, trace);
      have_header = true;
      continue;
    }
    const std::string kind = string_field(w, j, "", "record");
    if (kind == "header") w.fail("record", "a second header");
    if (kind != "request") w.fail("record", "unknown record kind '" + kind + "' (valid: request)");
    TraceRequest r = parse_request(w, j, trace.scheduler.prefix_block_tokens);
    if (!trace.requests.empty() && r.arrival_ns < trace.requests.back().arrival_ns) {
      w.fail("arrival_ns", "requests must come in arrival order: " + std::to_string(r.arrival_ns) +
                               " < " + std::to_string(trace.requests.back().arrival_ns) +
                               " (line " + std::to_string(trace.requests.back().line) + ")");
    }
    if (!ids.insert(r.request_id).second) {
      w.fail("request_id", "request " + std::to_string(r.request_id) + " listed twice");
    }
    trace.requests.push_back(std::move(r));
  }
  if (!have_header) throw InputError(file_name + ":1: record: empty trace (no header)");
  return trace;
}

RequestTrace read_request_trace(const std::string& path) {
  return parse_request_trace(read_data_file(path), path);
}

}  // namespace moesim::engine::serve
