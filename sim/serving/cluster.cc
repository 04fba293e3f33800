#include "sim/serving/cluster.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>

#include "sim/calibration/cost_model_factory.h"
#include "sim/config/config_error.h"
#include "sim/core/check.h"
#include "sim/core/distributions.h"
#include "sim/core/simulation.h"
#include "sim/cost/roofline.h"
#include "sim/memory/kv_cache.h"
#include "sim/memory/memory_layout.h"
#include "sim/network/network_model.h"
#include "sim/placement/expert_placement.h"
#include "sim/routing/synthetic_routing.h"
#include "sim/serving/step_model.h"
#include "sim/workload/workload_generator.h"
#ifdef MOESIM_HAVE_SIMGRID
#include "sim/network/simgrid/simgrid_model.h"
#endif

namespace moesim::sim {
namespace {

constexpr int64_t kPrefixBlock = kPrefixBlockTokens;

// One request being served.
struct Seq {
  Request req;
  int32_t replica = -1;
  int32_t rank = -1;
  int64_t prefill_target = 0;  // tokens whose KV must be computed before decoding
  int64_t prefilled = 0;
  int64_t generated = 0;
  int64_t owned_blocks = 0;         // KV + state blocks owned exclusively
  int64_t capacity_tokens = 0;      // tokens the sequence's KV blocks (owned + pinned) hold
  int64_t num_hit_blocks = 0;       // leading prefix blocks pinned from the cache
  int64_t num_inserted_blocks = 0;  // prompt prefix blocks this sequence inserted (pinned)
  uint64_t admit_order = 0;
  bool running = false;
  bool first_admission_done = false;
  bool decode_only = false;  // arrived on a decode replica with its KV transferred
};

struct Rank {
  std::unique_ptr<KvCache> kv;
  std::vector<int32_t> running;  // sequence ids in admission order
};

struct Replica {
  int32_t idx = 0;
  std::vector<GpuId> gpus;
  std::vector<Rank> ranks;
  std::deque<int32_t> waiting;
  std::unique_ptr<RoutingModel> routing;
  std::unique_ptr<NetworkModel> network;
  std::unique_ptr<StepModel> step_model;
  std::unique_ptr<ExpertPlacement> placement;  // this replica's (policies may add replicas)
  std::vector<BackgroundTransfer> transfers;
  std::map<int64_t, ServingPolicy*> transfer_owner;
  std::map<std::pair<int32_t, int32_t>, int64_t> replica_slot_blocks;  // (expert, gpu) -> blocks
  GpuMemoryLayout layout;
  bool prefill_only = false;
  bool decode_only = false;
  bool busy = false;
  int64_t step_idx = 0;
  int32_t num_in_flight = 0;    // admitted (running) sequences
  int32_t max_seqs = 0;         // in-flight cap (scheduler max_seqs unless a policy sets it)
  int64_t max_step_tokens = 0;  // tokens per step, all ranks (0 = no cap beyond per-rank budgets)
  int32_t outstanding = 0;      // routed here and not finished (waiting + running + transfer)
  SimTime step_start_ns = 0;
  std::vector<std::pair<int32_t, SeqSlice>> batch;  // (seq id, slice) of the running step
};

class TraceObserver final : public StepObserver {
 public:
  TraceObserver(std::vector<TraceSlice>* out, const Replica& r, SimTime start)
      : out_(out), replica_(r), start_(start) {}
  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                SimTime duration_ns) override {
    out_->push_back(TraceSlice{replica_.idx, replica_.gpus[gpu_idx].value, name, layer_idx,
                               start_ + start_ns, duration_ns});
  }

 private:
  std::vector<TraceSlice>* out_;
  const Replica& replica_;
  SimTime start_;
};

// Records per-expert routing for the step trace: splits each (src, dst GPU) selection count
// over the destination's experts by their selection shares, from its own RNG stream, so that
// recording never changes the simulation.
class RecordObserver final : public StepObserver {
 public:
  RecordObserver(StepRecord* rec, const Replica& r, const ExpertPlacement* placement,
                 RngStream& rng)
      : rec_(rec), replica_(r), placement_(placement), rng_(rng) {}
  StepObserver* chained = nullptr;
  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                SimTime duration_ns) override {
    if (chained) chained->on_slice(gpu_idx, name, layer_idx, start_ns, duration_ns);
  }
  void on_routing(int32_t layer_idx, int32_t moe_layer_idx, const CountMatrix& src_dst,
                  double dispatch_bytes, double combine_bytes) override {
    if (chained)
      chained->on_routing(layer_idx, moe_layer_idx, src_dst, dispatch_bytes, combine_bytes);
    StepRecord::Layer layer;
    layer.layer = layer_idx;
    layer.dispatch_bytes = dispatch_bytes;
    layer.combine_bytes = combine_bytes;
    auto* synth = dynamic_cast<SyntheticRoutingModel*>(replica_.routing.get());
    const int32_t top_k = replica_.routing->shape().top_k;
    std::vector<double> shares;
    std::vector<int64_t> counts;
    // counts_by_expert[e] for one source GPU: a token picks distinct experts, so no expert may
    // get more selections from a source than the source has tokens; excess moves to the
    // experts with room, on the same destination GPU first, then on the others.
    std::vector<int64_t> by_expert(placement_->num_experts());
    std::vector<int32_t> dst_of(placement_->num_experts());
    for (int32_t s = 0; s < src_dst.num_rows(); ++s) {
      const int64_t tokens = src_dst.row_sum(s) / top_k;
      std::fill(by_expert.begin(), by_expert.end(), 0);
      int64_t excess = 0;
      for (int32_t d = 0; d < src_dst.num_cols(); ++d) {
        int32_t c = src_dst.at(s, d);
        if (c == 0) continue;
        auto experts = placement_->experts_on(d);
        shares.assign(experts.size(), 1.0);
        if (synth) {
          auto pi = synth->selection_shares(moe_layer_idx, rec_->step, 0);
          for (size_t i = 0; i < experts.size(); ++i) shares[i] = pi[experts[i]] + 1e-12;
        }
        counts.assign(experts.size(), 0);
        multinomial(rng_, c, shares, counts);
        int64_t spill = 0;
        for (size_t i = 0; i < experts.size(); ++i) {
          if (counts[i] > tokens) {
            spill += counts[i] - tokens;
            counts[i] = tokens;
          }
        }
        for (size_t i = 0; i < experts.size() && spill > 0; ++i) {
          int64_t room = tokens - counts[i];
          int64_t x = std::min(room, spill);
          counts[i] += x;
          spill -= x;
        }
        excess += spill;
        for (size_t i = 0; i < experts.size(); ++i) {
          by_expert[experts[i]] += counts[i];
          dst_of[experts[i]] = d;
        }
      }
      for (int32_t e = 0; e < placement_->num_experts() && excess > 0; ++e) {
        int64_t x = std::min(tokens - by_expert[e], excess);
        if (x <= 0) continue;
        by_expert[e] += x;
        dst_of[e] = placement_->primary_gpu_of_expert()[e];
        excess -= x;
      }
      for (int32_t e = 0; e < placement_->num_experts(); ++e) {
        if (by_expert[e] == 0) continue;
        layer.routing.push_back(
            {replica_.gpus[s].value, e, replica_.gpus[dst_of[e]].value, by_expert[e]});
      }
    }
    rec_->layers.push_back(std::move(layer));
  }

 private:
  StepRecord* rec_;
  const Replica& replica_;
  const ExpertPlacement* placement_;
  RngStream& rng_;
};

class ClusterSim final : public PolicyContext {
 public:
  ClusterSim(const Scenario& sc, const RunOptions& opt, uint64_t seed,
             std::vector<std::unique_ptr<ServingPolicy>> policies)
      : sc_(sc),
        opt_(opt),
        sim_(seed),
        card_(*sc.model),
        topo_(*sc.topology),
        policies_(std::move(policies)) {
    k_arrival_ =
        sim_.register_kind("arrival", [this](const Event& e, Scheduler&) { on_arrival(e); });
    k_step_done_ =
        sim_.register_kind("step_done", [this](const Event& e, Scheduler&) { on_step_done(e); });
    k_transfer_ = sim_.register_kind("kv_transfer_done",
                                     [this](const Event& e, Scheduler&) { on_transfer_done(e); });
    k_end_ = sim_.register_kind("end_of_run", [this](const Event&, Scheduler&) { sim_.stop(); });
    k_timer_ = sim_.register_kind("policy_timer", [this](const Event& e, Scheduler&) {
      policies_[e.id0]->on_timer(*this, e.id1);
    });
    k_delayed_ = sim_.register_kind("delayed_admission", [this](const Event& e, Scheduler&) {
      auto it = delayed_.find(e.id0);
      MOESIM_CHECK(it != delayed_.end(), "unknown delayed admission");
      std::string pool = std::move(it->second);
      delayed_.erase(it);
      route_seq(static_cast<int32_t>(e.id0), pool);
    });
    build();
  }

  RunOutput run();

  // PolicyContext.
  SimTime now() const override { return sim_.now(); }
  void count_action(const std::string& name, int64_t n = 1) override;
  void schedule_timer(ServingPolicy* policy, SimTime delay_ns, int64_t tag) override;
  std::vector<std::string> pool_names() const override;
  int64_t pool_outstanding(const std::string& pool) const override;
  const ExpertPlacement* placement(int32_t replica) const override {
    return replicas_[replica].placement.get();
  }
  int32_t num_replicas() const override { return static_cast<int32_t>(replicas_.size()); }
  int64_t start_weight_transfer(ServingPolicy* policy, int32_t replica,
                                std::vector<double> bytes) override;
  bool add_expert_replica(int32_t replica, int32_t expert, int32_t gpu_idx) override;
  void remove_expert_replica(int32_t replica, int32_t expert, int32_t gpu_idx) override;
  void set_concurrency_limit(int32_t replica, int32_t max_seqs, int64_t max_step_tokens) override {
    Replica& r = replicas_[replica];
    if (max_seqs > 0) r.max_seqs = max_seqs;
    if (max_step_tokens > 0) r.max_step_tokens = max_step_tokens;
  }
  void report_metric(const std::string& name, double value) override {
    counters_.policy_metrics[name] = value;
  }

 private:
  struct Pool {
    std::string name;
    int32_t first = 0, last = 0;  // replicas [first, last)
  };
  void route_seq(int32_t sid, const std::string& pool);
  void after_step_policies(Replica& r, int64_t step_idx, int64_t step_tokens);
  void build();
  void schedule_next_open_loop();
  void admit_request(Request req);
  void reject(int32_t sid, const std::string& reason);
  int32_t pick_replica(const Request& req, bool decode_pool, const std::string& pool = "");
  void try_start_step(Replica& r);
  bool ensure_decode_capacity(Replica& r, int32_t rank_idx, int32_t sid);
  void preempt(Replica& r, int32_t rank_idx, int32_t sid);
  bool try_admit(Replica& r, int32_t sid, std::vector<int64_t>& budget,
                 std::vector<std::vector<SeqSlice>>& slices);
  void finish_prefill(Replica& r, Seq& s);
  void complete(Replica& r, int32_t sid);
  void release_seq_memory(Replica& r, Seq& s);
  void on_arrival(const Event& e);
  void on_step_done(const Event& e);
  void on_transfer_done(const Event& e);
  int64_t hits_on(const Rank& rank, const Seq& s) const;
  int64_t blocks_per_prefix() const { return kPrefixBlock / sc_.scheduler.kv_block_tokens; }
  // Takes n tokens of rank k's budget and of the step's total budget (a policy's cap); when the
  // total runs out every rank's budget drops to 0.
  void consume(std::vector<int64_t>& budget, int32_t k, int64_t n) {
    budget[k] -= n;
    step_tokens_left_ -= n;
    if (step_tokens_left_ <= 0) std::fill(budget.begin(), budget.end(), 0);
    for (int64_t& b : budget) b = std::min(b, step_tokens_left_);
  }
  int64_t step_tokens_left_ = 0;

  const Scenario& sc_;
  RunOptions opt_;
  Simulation sim_;
  const ModelCard& card_;
  const Topology& topo_;
  EventKind k_arrival_, k_step_done_, k_transfer_, k_end_, k_timer_, k_delayed_;
  std::vector<std::unique_ptr<ServingPolicy>> policies_;
  bool any_wants_loads_ = false;
  std::vector<Pool> pools_;
  std::map<int64_t, std::string> delayed_;  // seq id -> pool, while delayed by a policy
  int64_t next_transfer_id_ = 0;
  std::vector<double> loads_scratch_;
  std::unique_ptr<CostModel> cost_;
  std::unique_ptr<ExpertPlacement> placement_;
  std::vector<int32_t> gpu_of_expert_;
  std::vector<Replica> replicas_;
  std::unique_ptr<WorkloadGenerator> workload_;
  std::map<int64_t, Request> pending_;  // arrivals scheduled but not yet happened
  int64_t next_pending_key_ = 0;
  std::vector<Seq> seqs_;
  std::vector<RequestRecord> records_;
  std::map<int32_t, int32_t> session_replica_;
  std::vector<GpuRecord> gpu_records_;
  RunCounters counters_;
  uint64_t admit_counter_ = 0;
  uint64_t lru_tick_ = 0;
  int32_t rr_next_ = 0;
  int64_t recorded_steps_ = 0;
  std::vector<StepRecord> steps_;
  std::vector<TraceSlice> trace_;
  std::vector<std::vector<SeqSlice>> slices_scratch_;
};

void ClusterSim::build() {
  const DeploymentSpec& d = sc_.deployment;
  GpuMemoryInputs mem;
  mem.hbm_bytes = topo_.gpu_spec().hbm_bytes;
  mem.attention_tp = d.attention == AttentionParallel::kTensor ? d.attention_tp : 1;
  mem.kv_block_tokens = sc_.scheduler.kv_block_tokens;
  mem.workspace_bytes = static_cast<int64_t>(sc_.scheduler.workspace_gib * (1LL << 30));
  mem.reserve_fraction = sc_.scheduler.hbm_reserve_fraction;
  const int64_t num_moe = num_moe_layers(card_);
  if (num_moe > 0) {
    RoutingShape shape = routing_shape_of(card_);
    const MoeSpec* moe = nullptr;
    for (const LayerSpec& l : card_.layers) {
      if (l.ffn.is_moe) {
        moe = &l.ffn.moe;
        break;
      }
    }
    std::string src = sc_.source_file + ": deployment";
    placement_ = std::make_unique<ExpertPlacement>(
        d.placement == PlacementLayout::kContiguous
            ? ExpertPlacement::contiguous(shape.num_experts, d.gpus_per_replica,
                                          std::min(d.gpus_per_replica, topo_.gpus_per_node()),
                                          static_cast<int32_t>(moe->num_shared_experts), src)
            : ExpertPlacement::strided(shape.num_experts, d.gpus_per_replica,
                                       std::min(d.gpus_per_replica, topo_.gpus_per_node()),
                                       static_cast<int32_t>(moe->num_shared_experts), src));
    auto primary = placement_->primary_gpu_of_expert();
    gpu_of_expert_.assign(primary.begin(), primary.end());
    mem.routed_expert_slots = placement_->max_slots_per_gpu() * num_moe;
  }
  std::string error;
  GpuMemoryLayout layout = compute_gpu_memory_layout(card_, mem, &error);
  if (!error.empty()) {
    throw ConfigError(sc_.source_file, 0, 0, "deployment",
                      card_.name + " on " + topo_.gpu_spec().name + " with " +
                          std::to_string(d.gpus_per_replica) + " GPUs per replica " + error);
  }
  cost_ = make_cost_model(sc_.cost, topo_.gpu_spec());
  NetworkModelRegistry registry;
#ifdef MOESIM_HAVE_SIMGRID
  register_simgrid_model(registry);
#endif
  const int32_t tp = d.attention == AttentionParallel::kTensor ? d.attention_tp : 1;
  for (int32_t ri = 0; ri < d.num_replicas; ++ri) {
    Replica r;
    r.idx = ri;
    for (int32_t g = 0; g < d.gpus_per_replica; ++g)
      r.gpus.emplace_back(ri * d.gpus_per_replica + g);
    r.layout = layout;
    r.max_seqs = sc_.scheduler.max_seqs;
    r.prefill_only = d.prefill_replicas > 0 && ri < d.prefill_replicas;
    r.decode_only = d.prefill_replicas > 0 && ri >= d.prefill_replicas;
    if (num_moe > 0) {
      r.routing = std::make_unique<SyntheticRoutingModel>(
          routing_shape_of(card_), sc_.routing,
          sim_.rng("routing.replica." + std::to_string(ri)).next_u64());
      r.network = registry.make(sc_.network_model, topo_);
    }
    if (placement_) r.placement = std::make_unique<ExpertPlacement>(*placement_);
    r.step_model = std::make_unique<StepModel>(card_, topo_, d, r.gpus, r.placement.get(), *cost_,
                                               r.network.get(), r.routing.get());
    int32_t num_ranks = d.gpus_per_replica / tp;
    for (int32_t k = 0; k < num_ranks; ++k) {
      Rank rank;
      rank.kv = std::make_unique<KvCache>(layout.num_kv_blocks, sc_.scheduler.kv_block_tokens);
      r.ranks.push_back(std::move(rank));
    }
    for (GpuId g : r.gpus) {
      GpuRecord rec;
      rec.gpu = g.value;
      rec.replica = ri;
      rec.weight_bytes = layout.weight_bytes();
      rec.kv_pool_bytes = layout.kv_pool_bytes;
      rec.num_kv_blocks = layout.num_kv_blocks;
      rec.kv_block_bytes = layout.kv_block_bytes;
      gpu_records_.push_back(rec);
    }
    replicas_.push_back(std::move(r));
  }
  // Pointers into replicas_ are taken only now that the vector is complete.
  for (Replica& r : replicas_) {
    r.step_model->set_background(&r.transfers, sc_.scheduler.weight_transfer_chunk_mib * 1048576.0);
  }
  workload_ = std::make_unique<WorkloadGenerator>(sc_.workload, sim_.rng("workload"));
  if (d.pools.empty()) {
    pools_.push_back(Pool{"default", d.prefill_replicas, d.num_replicas});
  } else {
    int32_t next = 0;
    for (const PoolSpec& p : d.pools) {
      pools_.push_back(Pool{p.name, next, next + p.num_replicas});
      next += p.num_replicas;
    }
  }
  for (const auto& p : policies_) any_wants_loads_ = any_wants_loads_ || p->wants_expert_loads();
}

void ClusterSim::schedule_next_open_loop() {
  std::optional<Request> req = workload_->next();
  if (!req) return;
  int64_t key = next_pending_key_++;
  SimTime at = req->arrival_ns;
  pending_.emplace(key, std::move(*req));
  // Open-loop arrivals carry id1 = 1 so that the next one is pulled when this one happens.
  sim_.schedule_at(std::max(at, sim_.now()), k_arrival_, key, 1);
}

void ClusterSim::on_arrival(const Event& e) {
  auto it = pending_.find(e.id0);
  MOESIM_CHECK(it != pending_.end(), "arrival of an unknown request");
  Request req = std::move(it->second);
  pending_.erase(it);
  if (e.id1 == 1) schedule_next_open_loop();
  admit_request(std::move(req));
}

void ClusterSim::reject(int32_t sid, const std::string& reason) {
  RequestRecord& rec = records_[sid];
  rec.outcome = RequestOutcome::kRejected;
  rec.reject_reason = reason;
  rec.done_ns = -1;
  counters_.actions["reject:" + reason]++;
  if (seqs_[sid].req.session.valid()) workload_->abandon_session(seqs_[sid].req.session);
}

int32_t ClusterSim::pick_replica(const Request& req, bool decode_pool, const std::string& pool) {
  const DeploymentSpec& d = sc_.deployment;
  int32_t lo = 0, hi = d.num_replicas;
  if (d.prefill_replicas > 0) {
    lo = decode_pool ? d.prefill_replicas : 0;
    hi = decode_pool ? d.num_replicas : d.prefill_replicas;
  } else {
    const Pool* p = &pools_.front();
    for (const Pool& q : pools_) {
      if (q.name == pool) p = &q;
    }
    lo = p->first;
    hi = p->last;
  }
  int32_t n = hi - lo;
  if (sc_.scheduler.router == RouterPolicy::kRoundRobin) {
    return lo + (rr_next_++ % n);
  }
  if (sc_.scheduler.router == RouterPolicy::kSessionAffinity && req.session.valid() &&
      !decode_pool) {
    auto it = session_replica_.find(req.session.value);
    if (it != session_replica_.end()) return it->second;
  }
  int32_t best = lo;
  for (int32_t i = lo + 1; i < hi; ++i) {
    if (replicas_[i].outstanding < replicas_[best].outstanding) best = i;
  }
  if (sc_.scheduler.router == RouterPolicy::kSessionAffinity && req.session.valid() &&
      !decode_pool) {
    session_replica_[req.session.value] = best;
  }
  return best;
}

void ClusterSim::admit_request(Request req) {
  AdmissionDecision decision;
  for (auto& p : policies_) {
    p->on_arrival(*this, req, decision);
    if (decision.reject) break;
  }
  int32_t sid = static_cast<int32_t>(seqs_.size());
  Seq s;
  s.req = std::move(req);
  s.prefill_target = s.req.prompt_tokens + decision.extra_prefill_tokens;
  seqs_.push_back(std::move(s));
  RequestRecord rec;
  const Request& r = seqs_[sid].req;
  rec.request_id = r.id.value;
  rec.session_id = r.session.valid() ? r.session.value : -1;
  rec.turn_idx = r.turn_idx;
  rec.attempt_idx = r.attempt_idx;
  rec.domain = std::string(domain_name(r.domain));
  rec.arrival_ns = sim_.now();
  rec.prompt_tokens = r.prompt_tokens;
  rec.output_tokens = r.output_tokens;
  records_.push_back(rec);
  if (r.attempt_idx > 0) counters_.actions["rollback_reissue"]++;
  if (decision.reject) {
    reject(sid, decision.reject_reason);
    return;
  }
  const int64_t total = seqs_[sid].prefill_target + r.output_tokens;
  if (r.prompt_tokens + r.output_tokens > card_.max_context_tokens) {
    reject(sid, "context_too_long");
    return;
  }
  const GpuMemoryLayout& lay = replicas_[0].layout;
  const int64_t need = (total + sc_.scheduler.kv_block_tokens - 1) / sc_.scheduler.kv_block_tokens +
                       lay.state_blocks_per_sequence;
  if (need > lay.num_kv_blocks) {
    reject(sid, "kv_capacity");
    return;
  }
  if (decision.delay_ns > 0) {
    delayed_.emplace(sid, decision.pool);
    sim_.schedule_after(decision.delay_ns, k_delayed_, sid);
    return;
  }
  route_seq(sid, decision.pool);
}

void ClusterSim::route_seq(int32_t sid, const std::string& pool) {
  int32_t ri = pick_replica(seqs_[sid].req, false, pool);
  Replica& rep = replicas_[ri];
  seqs_[sid].replica = ri;
  records_[sid].replica = ri;
  rep.outstanding++;
  rep.waiting.push_back(sid);
  try_start_step(rep);
}

void ClusterSim::count_action(const std::string& name, int64_t n) {
  counters_.actions[name] += n;
  if (trace_.size() < 100000) {
    trace_.push_back(TraceSlice{0, -1, "policy:" + name, -1, sim_.now(), 0});
  }
}

void ClusterSim::schedule_timer(ServingPolicy* policy, SimTime delay_ns, int64_t tag) {
  for (size_t i = 0; i < policies_.size(); ++i) {
    if (policies_[i].get() == policy) {
      sim_.schedule_after(delay_ns, k_timer_, static_cast<int64_t>(i), tag);
      return;
    }
  }
  MOESIM_CHECK(false, "timer for an unknown policy");
}

std::vector<std::string> ClusterSim::pool_names() const {
  std::vector<std::string> out;
  for (const Pool& p : pools_) out.push_back(p.name);
  return out;
}

int64_t ClusterSim::pool_outstanding(const std::string& pool) const {
  int64_t n = 0;
  for (const Pool& p : pools_) {
    if (p.name != pool) continue;
    for (int32_t i = p.first; i < p.last; ++i) n += replicas_[i].outstanding;
  }
  return n;
}

int64_t ClusterSim::start_weight_transfer(ServingPolicy* policy, int32_t replica,
                                          std::vector<double> bytes) {
  Replica& r = replicas_[replica];
  MOESIM_CHECK(bytes.size() == r.gpus.size() * r.gpus.size(), "transfer matrix size");
  int64_t id = next_transfer_id_++;
  r.transfers.push_back(BackgroundTransfer{id, std::move(bytes)});
  r.transfer_owner[id] = policy;
  count_action("weight_transfer_start");
  try_start_step(r);
  return id;
}

bool ClusterSim::add_expert_replica(int32_t replica, int32_t expert, int32_t gpu_idx) {
  Replica& r = replicas_[replica];
  const int32_t tp = static_cast<int32_t>(r.gpus.size() / r.ranks.size());
  Rank& rank = r.ranks[gpu_idx / tp];
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card_.layers) {
    if (l.ffn.is_moe) {
      moe = &l.ffn.moe;
      break;
    }
  }
  // One expert slot in every MoE layer: its weights take KV blocks away from the pool.
  double bytes = expert_weight_bytes(card_, *moe) * static_cast<double>(num_moe_layers(card_));
  int64_t blocks = static_cast<int64_t>(std::ceil(bytes / r.layout.kv_block_bytes));
  if (!rank.kv->allocate(blocks)) return false;
  r.placement->add_replica(expert, gpu_idx);
  r.replica_slot_blocks[{expert, gpu_idx}] = blocks;
  count_action("expert_replica_add");
  return true;
}

void ClusterSim::remove_expert_replica(int32_t replica, int32_t expert, int32_t gpu_idx) {
  Replica& r = replicas_[replica];
  const int32_t tp = static_cast<int32_t>(r.gpus.size() / r.ranks.size());
  auto it = r.replica_slot_blocks.find({expert, gpu_idx});
  MOESIM_CHECK(it != r.replica_slot_blocks.end(), "removing a replica that was not added");
  r.placement->remove_replica(expert, gpu_idx);
  r.ranks[gpu_idx / tp].kv->release(it->second);
  r.replica_slot_blocks.erase(it);
  count_action("expert_replica_remove");
}

void ClusterSim::after_step_policies(Replica& r, int64_t step_idx, int64_t step_tokens) {
  // Finished background transfers.
  for (size_t i = 0; i < r.transfers.size();) {
    if (r.transfers[i].remaining_total() <= 0) {
      int64_t id = r.transfers[i].id;
      r.transfers.erase(r.transfers.begin() + static_cast<std::ptrdiff_t>(i));
      ServingPolicy* owner = r.transfer_owner[id];
      r.transfer_owner.erase(id);
      count_action("weight_transfer_done");
      owner->on_transfer_done(*this, id);
    } else {
      ++i;
    }
  }
  if (!any_wants_loads_ || !r.routing) return;
  auto* synth = dynamic_cast<SyntheticRoutingModel*>(r.routing.get());
  if (!synth) return;
  const int32_t num_moe = static_cast<int32_t>(num_moe_layers(card_));
  for (int32_t l = 0; l < num_moe; ++l) {
    auto pi = synth->selection_shares(l, step_idx, 0);
    loads_scratch_.assign(pi.size(), 0.0);
    for (size_t e = 0; e < pi.size(); ++e) {
      loads_scratch_[e] = pi[e] * static_cast<double>(step_tokens);
    }
    for (auto& p : policies_) {
      if (p->wants_expert_loads()) p->on_expert_loads(*this, r.idx, l, loads_scratch_);
    }
  }
}

int64_t ClusterSim::hits_on(const Rank& rank, const Seq& s) const {
  if (!sc_.scheduler.prefix_caching || s.decode_only || s.first_admission_done) return 0;
  const auto& h = s.req.prefix_block_hashes;
  // At least one prompt token is always computed: at most (prompt - 1) / 512 full blocks hit.
  int64_t max_blocks = (s.req.prompt_tokens - 1) / kPrefixBlock;
  int64_t n = 0;
  while (n < max_blocks && n < static_cast<int64_t>(h.size()) && rank.kv->contains(h[n])) ++n;
  return n;
}

bool ClusterSim::try_admit(Replica& r, int32_t sid, std::vector<int64_t>& budget,
                           std::vector<std::vector<SeqSlice>>& slices) {
  Seq& s = seqs_[sid];
  const GpuMemoryLayout& lay = r.layout;
  int32_t best = -1;
  int64_t best_hits = -1, best_room = 0, best_need = 0;
  for (int32_t k = 0; k < static_cast<int32_t>(r.ranks.size()); ++k) {
    if (budget[k] <= 0 && !s.decode_only) continue;
    const Rank& rank = r.ranks[k];
    int64_t hits = hits_on(rank, s);
    int64_t need = rank.kv->blocks_for_tokens(s.prefill_target) - hits * blocks_per_prefix() +
                   lay.state_blocks_per_sequence;
    if (!rank.kv->can_allocate(need)) continue;
    int64_t room = rank.kv->free_blocks() + rank.kv->evictable_blocks() -
                   static_cast<int64_t>(rank.running.size()) * 4;
    if (hits > best_hits || (hits == best_hits && room > best_room)) {
      best = k;
      best_hits = hits;
      best_room = room;
      best_need = need;
    }
  }
  if (best < 0) return false;
  Rank& rank = r.ranks[best];
  int64_t pinned = 0;
  if (best_hits > 0) {
    pinned = rank.kv->match_and_pin(
        std::span<const uint64_t>(s.req.prefix_block_hashes.data(), best_hits), ++lru_tick_);
    MOESIM_CHECK(pinned == best_hits, "prefix hits changed during admission");
  }
  MOESIM_CHECK(rank.kv->allocate(best_need), "admission allocation failed after check");
  s.rank = best;
  s.running = true;
  s.admit_order = ++admit_counter_;
  s.owned_blocks = best_need;
  s.num_hit_blocks = best_hits;
  s.num_inserted_blocks = 0;
  s.capacity_tokens = (best_need - lay.state_blocks_per_sequence) * sc_.scheduler.kv_block_tokens +
                      best_hits * kPrefixBlock;
  RequestRecord& rec = records_[sid];
  if (!s.first_admission_done) {
    s.first_admission_done = true;
    if (!s.decode_only) {
      counters_.prompt_tokens_total += s.req.prompt_tokens;
      counters_.prompt_tokens_cached += best_hits * kPrefixBlock;
      rec.cached_prompt_tokens = best_hits * kPrefixBlock;
    }
    if (rec.first_scheduled_ns < 0) rec.first_scheduled_ns = sim_.now();
  }
  if (!s.decode_only) s.prefilled = best_hits * kPrefixBlock;
  rank.running.push_back(sid);
  r.num_in_flight++;
  if (s.prefilled < s.prefill_target) {
    int64_t chunk = std::min(s.prefill_target - s.prefilled, budget[best]);
    consume(budget, best, chunk);
    SeqSlice sl{chunk, s.prefilled, true};
    slices[best].push_back(sl);
    r.batch.emplace_back(sid, sl);
  }
  return true;
}

void ClusterSim::release_seq_memory(Replica& r, Seq& s) {
  Rank& rank = r.ranks[s.rank];
  const auto& h = s.req.prefix_block_hashes;
  if (s.num_hit_blocks + s.num_inserted_blocks > 0) {
    rank.kv->unpin(std::span<const uint64_t>(h.data(), s.num_hit_blocks + s.num_inserted_blocks),
                   ++lru_tick_);
  }
  rank.kv->release(s.owned_blocks);
  s.owned_blocks = 0;
  s.num_hit_blocks = s.num_inserted_blocks = 0;
  s.capacity_tokens = 0;
  auto it =
      std::find(rank.running.begin(), rank.running.end(), static_cast<int32_t>(&s - seqs_.data()));
  MOESIM_CHECK(it != rank.running.end(), "sequence not running on its rank");
  rank.running.erase(it);
  r.num_in_flight--;
  s.running = false;
}

void ClusterSim::preempt(Replica& r, int32_t rank_idx, int32_t sid) {
  Seq& s = seqs_[sid];
  release_seq_memory(r, s);
  s.prefilled = 0;
  s.decode_only = false;
  s.prefill_target = s.req.prompt_tokens + s.generated;  // recompute everything
  s.rank = -1;
  r.waiting.push_front(sid);
  records_[sid].num_preemptions++;
  counters_.num_preemptions++;
  counters_.actions["preempt"]++;
}

bool ClusterSim::ensure_decode_capacity(Replica& r, int32_t rank_idx, int32_t sid) {
  Rank& rank = r.ranks[rank_idx];
  Seq& s = seqs_[sid];
  int64_t needed_tokens = s.req.prompt_tokens + s.generated;
  while (s.capacity_tokens < needed_tokens) {
    if (rank.kv->allocate(1)) {
      s.owned_blocks++;
      s.capacity_tokens += sc_.scheduler.kv_block_tokens;
      continue;
    }
    // Out of blocks: preempt the most recently admitted sequence of this rank.
    int32_t victim = rank.running.back();
    for (int32_t v : rank.running) {
      if (seqs_[v].admit_order > seqs_[victim].admit_order) victim = v;
    }
    preempt(r, rank_idx, victim);
    if (victim == sid) return false;
  }
  return true;
}

void ClusterSim::try_start_step(Replica& r) {
  if (r.busy) return;
  const int32_t num_ranks = static_cast<int32_t>(r.ranks.size());
  std::vector<int64_t> budget(num_ranks, sc_.scheduler.max_batch_tokens_per_gpu);
  step_tokens_left_ = r.max_step_tokens > 0 ? r.max_step_tokens : INT64_MAX;
  auto& slices = slices_scratch_;
  slices.assign(num_ranks, {});
  r.batch.clear();
  // 1. Decode tokens of running sequences (may preempt when blocks run out).
  for (int32_t k = 0; k < num_ranks; ++k) {
    std::vector<int32_t> snapshot = r.ranks[k].running;
    for (int32_t sid : snapshot) {
      Seq& s = seqs_[sid];
      if (!s.running || s.prefilled < s.prefill_target) continue;
      if (budget[k] <= 0) break;
      if (!ensure_decode_capacity(r, k, sid)) continue;
      consume(budget, k, 1);
      SeqSlice sl{1, s.req.prompt_tokens + s.generated - 1, false};
      slices[k].push_back(sl);
      r.batch.emplace_back(sid, sl);
    }
  }
  // Preemption may have evicted a sequence already in the batch: drop those.
  {
    std::vector<std::pair<int32_t, SeqSlice>> kept;
    for (auto& [sid, sl] : r.batch) {
      if (seqs_[sid].running) kept.emplace_back(sid, sl);
    }
    if (kept.size() != r.batch.size()) {
      r.batch = kept;
      slices.assign(num_ranks, {});
      for (auto& [sid, sl] : r.batch) slices[seqs_[sid].rank].push_back(sl);
    }
  }
  // 2. Prefill chunks of running sequences.
  for (int32_t k = 0; k < num_ranks; ++k) {
    for (int32_t sid : r.ranks[k].running) {
      Seq& s = seqs_[sid];
      if (s.prefilled >= s.prefill_target || budget[k] <= 0) continue;
      int64_t chunk = std::min(s.prefill_target - s.prefilled, budget[k]);
      consume(budget, k, chunk);
      SeqSlice sl{chunk, s.prefilled, true};
      slices[k].push_back(sl);
      r.batch.emplace_back(sid, sl);
    }
  }
  // 3. Admissions, first come first served (head-of-line: stop at the first that does not fit).
  while (!r.waiting.empty() && r.num_in_flight < r.max_seqs) {
    int32_t sid = r.waiting.front();
    if (!try_admit(r, sid, budget, slices)) break;
    r.waiting.pop_front();
    Seq& s = seqs_[sid];
    if (s.prefilled >= s.prefill_target) {
      // KV arrived from a prefill replica: decode right away.
      if (ensure_decode_capacity(r, s.rank, sid)) {
        SeqSlice sl{1, s.req.prompt_tokens + s.generated - 1, false};
        slices[s.rank].push_back(sl);
        r.batch.emplace_back(sid, sl);
      }
    }
  }
  if (r.batch.empty()) return;
  bool in_window =
      opt_.chrome_trace && sim_.now() >= opt_.trace_start_ns && sim_.now() < opt_.trace_end_ns;
  bool record = opt_.record_steps && recorded_steps_ < opt_.record_max_steps;
  TraceObserver tracer(&trace_, r, sim_.now());
  StepRecord rec;
  rec.step = r.step_idx;
  rec.replica = r.idx;
  std::optional<RecordObserver> recorder;
  StepObserver* obs = nullptr;
  if (record) {
    recorder.emplace(&rec, r, r.placement.get(), sim_.rng("record.split"));
    recorder->chained = in_window ? &tracer : nullptr;
    obs = &*recorder;
  } else if (in_window) {
    obs = &tracer;
  }
  const StepResult& res = r.step_model->run(r.step_idx, slices, obs);
  r.busy = true;
  r.step_start_ns = sim_.now();
  counters_.num_steps++;
  counters_.dispatch_bytes += res.dispatch_bytes;
  counters_.combine_bytes += res.combine_bytes;
  counters_.max_gpu_selections_sum += res.max_gpu_selections;
  counters_.mean_gpu_selections_sum += res.mean_gpu_selections;
  for (size_t g = 0; g < r.gpus.size(); ++g) {
    GpuRecord& gr = gpu_records_[r.gpus[g].value];
    gr.compute_ns += res.compute_ns[g];
    gr.comm_ns += res.comm_ns[g];
    gr.wait_ns += res.wait_ns[g];
  }
  if (record) {
    rec.start_ns = sim_.now();
    rec.end_ns = sim_.now() + res.duration_ns;
    const int32_t tp = static_cast<int32_t>(r.gpus.size()) / static_cast<int32_t>(r.ranks.size());
    for (auto& [sid, sl] : r.batch) {
      rec.seqs.push_back(StepRecord::Seq{seqs_[sid].req.id.value,
                                         r.gpus[seqs_[sid].rank * tp].value, sl.prefill,
                                         sl.new_tokens, sl.context_tokens});
    }
    steps_.push_back(std::move(rec));
    recorded_steps_++;
  }
  sim_.schedule_after(res.duration_ns, k_step_done_, r.idx, r.step_idx);
  r.step_idx++;
}

void ClusterSim::finish_prefill(Replica& r, Seq& s) {
  // Insert the prompt's full prefix blocks into the rank's cache (ownership moves from the
  // sequence to pinned entries), so later requests with the same prefix re-use them.
  if (!sc_.scheduler.prefix_caching) return;
  Rank& rank = r.ranks[s.rank];
  const auto& h = s.req.prefix_block_hashes;
  int64_t full =
      std::min<int64_t>(s.req.prompt_tokens / kPrefixBlock, static_cast<int64_t>(h.size()));
  int64_t next = s.num_hit_blocks + s.num_inserted_blocks;
  while (next < full && !rank.kv->contains(h[next]) &&
         s.owned_blocks >= blocks_per_prefix() + r.layout.state_blocks_per_sequence) {
    rank.kv->insert_pinned(h[next], blocks_per_prefix(), kPrefixBlock, ++lru_tick_);
    s.owned_blocks -= blocks_per_prefix();
    s.num_inserted_blocks++;
    next++;
  }
}

void ClusterSim::complete(Replica& r, int32_t sid) {
  Seq& s = seqs_[sid];
  RequestRecord& rec = records_[sid];
  rec.outcome = RequestOutcome::kCompleted;
  rec.done_ns = sim_.now();
  rec.generated_tokens = s.generated;
  std::optional<Request> next;
  if (s.req.session.valid()) next = workload_->on_turn_completed(s.req.session, sim_.now());
  if (next && sc_.scheduler.prefix_caching) {
    // The context of this turn is the next turn's re-used prefix: keep its full blocks cached.
    Rank& rank = r.ranks[s.rank];
    int64_t reuse_blocks =
        std::min<int64_t>(next->reused_prefix_tokens / kPrefixBlock,
                          static_cast<int64_t>(next->prefix_block_hashes.size()));
    for (int64_t b = 0; b < reuse_blocks; ++b) {
      uint64_t key = next->prefix_block_hashes[b];
      if (rank.kv->contains(key)) continue;
      if (s.owned_blocks - r.layout.state_blocks_per_sequence < blocks_per_prefix()) break;
      rank.kv->insert_unpinned_merge(key, blocks_per_prefix(), kPrefixBlock, ++lru_tick_);
      s.owned_blocks -= blocks_per_prefix();
    }
  }
  release_seq_memory(r, s);
  r.outstanding--;
  for (auto& p : policies_) p->on_complete(*this, s.req, rec);
  if (next) {
    int64_t key = next_pending_key_++;
    SimTime at = std::max(next->arrival_ns, sim_.now());
    pending_.emplace(key, std::move(*next));
    sim_.schedule_at(at, k_arrival_, key, 0);
  }
}

void ClusterSim::on_step_done(const Event& e) {
  Replica& r = replicas_[e.id0];
  r.busy = false;
  std::vector<int32_t> to_transfer;
  int64_t step_tokens = 0;
  for (auto& [sid, sl] : r.batch) step_tokens += sl.new_tokens;
  for (auto& [sid, sl] : r.batch) {
    Seq& s = seqs_[sid];
    if (!s.running) continue;
    if (sl.prefill) {
      s.prefilled += sl.new_tokens;
      if (s.prefilled < s.prefill_target) continue;
      finish_prefill(r, s);
    }
    s.generated += 1;
    RequestRecord& rec = records_[sid];
    rec.generated_tokens = s.generated;
    if (rec.first_token_ns < 0) rec.first_token_ns = sim_.now();
    if (s.generated >= s.req.output_tokens) {
      complete(r, sid);
    } else if (r.prefill_only) {
      to_transfer.push_back(sid);
    }
  }
  for (int32_t sid : to_transfer) {
    // P/D: move the KV to a decode replica over the network, then free it here.
    Seq& s = seqs_[sid];
    int32_t dst = pick_replica(s.req, true);
    GpuId src_gpu = r.gpus[s.rank * (static_cast<int32_t>(r.gpus.size()) /
                                     static_cast<int32_t>(r.ranks.size()))];
    Replica& dr = replicas_[dst];
    GpuId dst_gpu = dr.gpus[s.rank % dr.gpus.size()];
    double bytes =
        r.layout.kv_bytes_per_token * static_cast<double>(s.req.prompt_tokens + s.generated - 1) +
        r.layout.state_bytes_per_sequence;
    double min_cap = 0;
    for (int32_t link : topo_.route(src_gpu, dst_gpu)) {
      double c = topo_.links()[link].capacity_bytes_per_s;
      min_cap = min_cap == 0 ? c : std::min(min_cap, c);
    }
    SimTime t = topo_.route_latency_ns(src_gpu, dst_gpu) +
                (min_cap > 0 ? from_seconds(bytes / min_cap) : 0);
    release_seq_memory(r, s);
    r.outstanding--;
    counters_.kv_transfers++;
    counters_.kv_transfer_bytes += bytes;
    dr.outstanding++;
    s.replica = dst;
    s.decode_only = true;
    s.prefilled = s.prefill_target;
    s.rank = -1;
    records_[sid].replica = dst;
    sim_.schedule_after(t, k_transfer_, sid, dst);
  }
  after_step_policies(r, e.id1, step_tokens);
  try_start_step(r);
}

void ClusterSim::on_transfer_done(const Event& e) {
  Replica& dr = replicas_[e.id1];
  dr.waiting.push_back(static_cast<int32_t>(e.id0));
  try_start_step(dr);
}

RunOutput ClusterSim::run() {
  SimTime end = from_seconds(sc_.run.duration_s);
  sim_.schedule_at(end, k_end_);
  for (auto& p : policies_) p->on_start(*this);
  schedule_next_open_loop();
  sim_.run(end);
  for (auto& p : policies_) p->on_finish(*this);
  RunOutput out;
  out.end_ns = sim_.now();
  // Conservation: every arrived request is completed, rejected or in flight, once.
  int64_t completed = 0, rejected = 0, in_flight = 0;
  for (size_t i = 0; i < records_.size(); ++i) {
    RequestRecord& rec = records_[i];
    if (rec.outcome == RequestOutcome::kInFlight) rec.generated_tokens = seqs_[i].generated;
    switch (rec.outcome) {
      case RequestOutcome::kCompleted:
        ++completed;
        break;
      case RequestOutcome::kRejected:
        ++rejected;
        break;
      case RequestOutcome::kInFlight:
        ++in_flight;
        break;
    }
  }
  int64_t live = 0;
  for (const Replica& r : replicas_) live += r.outstanding;
  int64_t in_transfer = 0;
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (records_[i].outcome == RequestOutcome::kInFlight && !seqs_[i].running &&
        seqs_[i].decode_only && seqs_[i].rank < 0) {
      ++in_transfer;
    }
  }
  (void)in_transfer;
  out.conservation_ok = completed + rejected + in_flight == static_cast<int64_t>(records_.size()) &&
                        live == in_flight;
  out.conservation_message =
      "arrived " + std::to_string(records_.size()) + " = completed " + std::to_string(completed) +
      " + rejected " + std::to_string(rejected) + " + in flight " + std::to_string(in_flight) +
      (live == in_flight ? "" : " (MISMATCH: replicas hold " + std::to_string(live) + ")");
  for (Replica& r : replicas_) {
    for (size_t k = 0; k < r.ranks.size(); ++k) {
      const int32_t tp = static_cast<int32_t>(r.gpus.size() / r.ranks.size());
      for (int32_t j = 0; j < tp; ++j) {
        GpuRecord& g = gpu_records_[r.gpus[k * tp + j].value];
        g.kv_high_water_blocks = r.ranks[k].kv->high_water_blocks();
      }
      counters_.kv_evictions += r.ranks[k].kv->num_evictions();
    }
  }
  counters_.cost_out_of_range_queries = cost_->num_out_of_range_queries();
  const WorkloadStats& ws = workload_->stats();
  if (ws.num_rollbacks > 0) counters_.actions["rollback"] = ws.num_rollbacks;
  out.requests = std::move(records_);
  out.gpus = std::move(gpu_records_);
  out.counters = counters_;
  out.summary =
      summarize(out.requests, out.gpus, out.counters, out.end_ns, sc_.slo.ttft_ms, sc_.slo.tpot_ms);
  out.digest = sim_.digest().value();
  out.digest_hex = sim_.digest().hex();
  out.num_events = sim_.num_events_executed();
  out.trace = std::move(trace_);
  out.steps = std::move(steps_);
  if (placement_) {
    for (int32_t e = 0; e < placement_->num_experts(); ++e) {
      std::vector<int32_t> gpus;
      for (int32_t g : placement_->replicas(e)) gpus.push_back(replicas_[0].gpus[g].value);
      out.expert_gpus.push_back(gpus);
    }
  }
  return out;
}

}  // namespace

RunOutput run_scenario(const Scenario& scenario, const RunOptions& options, int64_t seed_override,
                       std::vector<std::unique_ptr<ServingPolicy>> policies) {
  uint64_t seed = seed_override >= 0 ? static_cast<uint64_t>(seed_override) : scenario.run.seed;
  ClusterSim sim(scenario, options, seed, std::move(policies));
  return sim.run();
}

}  // namespace moesim::sim
