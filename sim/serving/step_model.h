// The step model: how long one step of one replica takes, layer by layer, on every GPU.
//
// Per layer and GPU: RMSNorm and attention over the GPU's sequences (prefill cost grows with
// context squared for softmax attention, decode with context; KDA constant per token); dense
// layers run their FFN. MoE layers: router, routing drawn by the RoutingModel (per source GPU
// and destination GPU), the dispatch all-to-all through the NetworkModel (a barrier: it starts
// when the last GPU is ready and ends when its last flow ends), each GPU's routed experts and
// shared experts, then the combine all-to-all (another barrier). Per-GPU clocks advance through
// the layers; time a GPU spends waiting for the slowest one at a barrier is recorded as wait.
//
// Overlap ([deployment] overlap, DeploymentSpec::overlap; docs/serving.md, "Overlap schedules"):
//  - simple (microbatch_overlap = true): a MoE layer takes max(C, D) + min(C, D) / 2 where C is
//    the barrier-synchronised compute after attention and D the two collectives;
//  - two_microbatch, decode_pipeline: each rank's tokens split into two micro-batches (a prefill
//    chunk may be cut in two); every MoE layer's attention, router, shared and routed experts are
//    priced per micro-batch from its own tokens, its collectives from its own traffic (the layer's
//    routing drawn once and split over the micro-batches by their tokens), and consecutive MoE
//    layers run on the micro-batch timeline of sim/serving/layer_timeline.h (compute and
//    communication resources per GPU, attention inside the overlap window, the micro-batches
//    carried across layer boundaries). Dense layers, the output head and speculative draft passes
//    join the micro-batches and run as without overlap (draft passes' MoE FFNs: barriers).
//
// Costs: every op becomes an OpWork (FLOPs, bytes; sim/cost/op_formulas.h) priced by the
// CostModel. Expert FFN on a GPU costs its selections x per-token FLOPs, and reads the weights
// of its active experts (expected number of distinct experts hit by the GPU's selections, spread
// uniformly over its experts) -- per micro-batch under the timelines, so weights are read twice.
// Unique tokens per (source, destination) for the all-to-all: T_s (1 - (1 - q)^k), q the share
// of the source's selections bound for the destination (docs/serving.md).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim/core/ids.h"
#include "sim/core/time.h"
#include "sim/cost/cost_model.h"
#include "sim/cost/seq_slice.h"
#include "sim/metrics/step_totals.h"
#include "sim/model/model_card.h"
#include "sim/network/fast_all_to_all.h"
#include "sim/network/network_model.h"
#include "sim/network/traffic_plan.h"
#include "sim/placement/expert_placement.h"
#include "sim/placement/layer_placements.h"
#include "sim/routing/count_matrix.h"
#include "sim/routing/routing_model.h"
#include "sim/scenario/deployment.h"
#include "sim/serving/layer_timeline.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// SeqSlice (one sequence's share of a step) is defined in sim/cost/seq_slice.h.

// Observers (metrics, traces, step records) receive what the model did; they never change it.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // A span of work or waiting on replica GPU `gpu_idx`, relative to the step start.
  virtual void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                        SimTime duration_ns) {}
  // The routing of one MoE layer: selections per (source GPU idx, destination GPU idx).
  virtual void on_routing(int32_t layer_idx, int32_t moe_layer_idx, const CountMatrix& src_dst,
                          double dispatch_bytes, double combine_bytes) {}
};

// Bytes still to send between the replica's GPUs for a background transfer (e.g. expert weights
// being replicated): remaining_bytes[src * P + dst]. Each dispatch collective carries at most
// chunk_bytes of it per pair, so the transfer competes with serving traffic on the same links.
struct BackgroundTransfer {
  int64_t id = 0;
  std::vector<double> remaining_bytes;
  double remaining_total() const;
};

// One step as the step model timed it: its duration, per-GPU time, and the traffic and balance
// totals (StepTotals).
struct StepResult : StepTotals {
  SimTime duration_ns = 0;
  // Per replica GPU: busy computing, in collectives, waiting at barriers.
  std::vector<SimTime> compute_ns, comm_ns, wait_ns;
  // With set_report_expert_loads(true): the load of every routed expert in every MoE layer
  // (num_moe_layers x num_experts, row-major), the routing model's expected selections per token
  // (RoutingModel::expected_shares) x the step's tokens. Empty otherwise, or when the routing
  // model states no expectation. What load-driven policies act on.
  std::vector<double> expert_loads;
  // Speculative decoding (StepModel::set_draft_tokens): time of the step's draft passes, from
  // the verification's end (its slowest GPU) to the step's end. 0 without drafts.
  SimTime draft_ns = 0;
  // With draft GPUs (StepModel::set_draft_gpus): each one's busy time in the step's draft passes.
  std::vector<SimTime> draft_gpu_busy_ns;
  // With set_track_nic_bytes(true): per replica GPU, the all-to-all bytes that entered / left it
  // through its NIC (its network link) over the step's collectives. Empty otherwise.
  std::vector<double> nic_in_bytes, nic_out_bytes;
};

class StepModel {
 public:
  // `gpus`: the replica's GPUs; `placements`: routed experts on replica GPU indices, one map per
  // MoE layer (null for models without MoE layers): MoE layer l is routed, dispatched and priced
  // with placements->layer(l). Where a layer's placement has replicas, routing is drawn per
  // expert and dispatched by the token-to-replica rule; otherwise per destination GPU (the fast
  // path). References and pointers must outlive the model; placements may change between steps.
  StepModel(const ModelCard& card, const Topology& topology, const DeploymentSpec& deployment,
            std::vector<GpuId> gpus, const LayerPlacements* placements, const CostModel& cost,
            NetworkModel* network, RoutingModel* routing);

  // Background transfers carried by the next steps' dispatch collectives (null: none), at most
  // `chunk_bytes` per (src, dst) pair per collective. run() decrements remaining_bytes.
  void set_background(std::vector<BackgroundTransfer>* transfers, double chunk_bytes) {
    background_ = transfers;
    background_chunk_bytes_ = chunk_bytes;
  }

  // Host-link contention (the tiered KV cache's copies share a GPU's PCIe link with its NIC
  // traffic; sim/memory/kv_tiers.h, docs/serving.md): per replica GPU, factors >= 1 by which the
  // time per byte of its NIC link in / out grows in the following steps, on both tiers; empty
  // spans: none. The exact tier passes them to the network model (NetworkModel::
  // set_link_slowdown; checked to be supported). They stay until set again.
  void set_nic_slowdown(std::span<const double> in, std::span<const double> out);
  // Whether run() fills StepResult::nic_in_bytes / nic_out_bytes.
  void set_track_nic_bytes(bool on);

  // Fixed cost of the MoE dispatch / combine kernels beyond the network model's time (a
  // calibrated profile's [[network.kernel]] fits for dispatch = "low_latency"; KernelCost in
  // network_model.h): added to each collective's seconds, on both tiers. Default: none.
  void set_kernel_costs(const KernelCost& dispatch, const KernelCost& combine) {
    dispatch_kernel_ = dispatch;
    combine_kernel_ = combine;
  }

  // Whether run() fills StepResult::expert_loads (off by default: a pass over experts per layer).
  void set_report_expert_loads(bool on) { report_loads_ = on; }

  // The fast tier (docs/fast_tier.md): MoE layers drawn as per-destination totals and timed by
  // FastAllToAll instead of the (source, destination) matrix and the network model; replicated
  // experts by the token-to-replica rule on per-expert totals (ReplicaDispatcher::
  // dispatch_totals). A layer stays on the exact tier where the fast one does not apply: a
  // background transfer in flight, a routing model without totals (a replay, pruned routing),
  // participants FastAllToAll refuses. StepObserver::on_routing is not called for fast layers (no
  // matrix is drawn).
  void set_fast_tier(bool on);
  // Routed-expert seconds by (selections, slots) for one model card and cost model: a
  // direct-mapped table kept across steps (a pure function of the two where the cost model does
  // not count its queries). Replicas built from one card and cost model may share one
  // (ReplicaBuilder does): one table warm in cache instead of one per replica.
  struct ExpertMemoTable {
    struct Entry {
      int64_t key = -1;  // selections << 16 | slots; -1: empty
      double seconds = 0;
    };
    const ModelCard* card = nullptr;
    const CostModel* cost = nullptr;
    std::vector<Entry> entries;
  };
  // This model's table (none where it keeps no memo: the cost model counts its queries or the
  // card has no MoE layer).
  std::shared_ptr<ExpertMemoTable> expert_memo() const { return expert_memo_; }
  // Uses `table` (another model's expert_memo()) instead of its own. Precondition (checked):
  // built for the same card and cost model objects.
  void share_expert_memo(std::shared_ptr<ExpertMemoTable> table);
  bool fast_tier() const { return fast_tier_; }
  // The fast tier's candidate draw (RoutingQuery::candidate_epsilon) for layers without
  // replicas: per layer, at most this chance that a GPU priced at its expected selections would
  // have drawn more than the likeliest GPU (docs/fast_tier.md, "Candidate draw").
  static constexpr double kFastCandidateEpsilon = 1e-6;
  // Why the fast tier can never apply to this replica's collectives ("" when it can).
  std::string fast_tier_refusal() const;

  // Speculative decoding with the card's MTP modules (step_model_draft.cc): after the
  // verification (the decode slices carry 1 + d tokens), draft pass i = 1..k runs one MTP module
  // (the card's last layer: norms and the 2h -> h projection, its attention, its FFN: a MoE FFN
  // routed and dispatched like the last MoE layer, then the output head) on the decode slices
  // with d >= i, one token each. 0 (the default): no draft passes.
  void set_draft_tokens(int32_t num_draft_tokens) { num_draft_tokens_ = num_draft_tokens; }
  // Drafts with a co-located dense draft model instead of the MTP module (null: MTP): draft pass
  // i runs all of `draft`'s layers (norms, attention, dense FFN) and its output head on every GPU
  // for its rank's drafting sequences, without collectives. `draft` must outlive the model.
  void set_draft_model(const ModelCard* draft) { draft_model_ = draft; }
  // The draft model on GPUs of its own (SpeculativeSpec::draft_gpus; empty: co-located): pass i
  // deals the replica's drafting sequences round robin (rank by rank, in slice order) over
  // `draft_gpus`, each running the whole draft model on its share, and lasts as long as the
  // busiest; the token ids cross to the draft GPUs and back (twice the route latency from the
  // replica's first GPU to the first draft GPU per step). The target's GPUs wait meanwhile.
  void set_draft_gpus(std::vector<GpuId> draft_gpus);

  int32_t num_gpus() const { return static_cast<int32_t>(gpus_.size()); }
  // Attention ranks (GPUs / attention_tp).
  int32_t num_ranks() const { return num_gpus() / tp_; }

  // Runs one step; `ranks[r]` lists rank r's sequence slices. `observer` may be null.
  const StepResult& run(int64_t step_idx, const std::vector<std::vector<SeqSlice>>& ranks,
                        StepObserver* observer);

 private:
  struct LayerInfo {
    int32_t attn_class = 0;  // index into attn_classes_ (layers with equal attention specs)
    int32_t moe_idx = -1;    // -1 for dense layers
  };
  // Attention + norms seconds on one GPU for one layer class.
  double attention_seconds(int32_t attn_class, const std::vector<SeqSlice>& seqs, int64_t tokens);
  // Pieces of run(), in step order. Op work comes from sim/cost/op_formulas.h; these keep the
  // clocks (clock_s_) and the per-GPU compute / comm / wait sums.
  void begin_step();
  // Tokens per rank and per GPU, attention seconds per GPU and class; returns the step's tokens.
  int64_t price_attention(const std::vector<std::vector<SeqSlice>>& ranks);
  // `seconds` of compute on GPU g, traced as `name` (inline: the per-GPU loops' hot path).
  void advance_compute(int32_t g, const char* name, int32_t layer_idx, double seconds,
                       StepObserver* observer) {
    if (observer) trace_compute(g, name, layer_idx, seconds, observer);
    clock_s_[g] += seconds;
    compute_s_[g] += seconds;
  }
  // advance_compute()'s span for the observer.
  void trace_compute(int32_t g, const char* name, int32_t layer_idx, double seconds,
                     StepObserver* observer) const;
  void run_dense_ffn(int32_t layer_idx, const FfnSpec& ffn, StepObserver* observer);
  // Router to combine of one MoE layer, then its timeline (with or without overlap).
  void run_moe_layer(int64_t step_idx, int32_t layer_idx, StepObserver* observer);
  // The same for the card's layer `source_layer_idx`, traced as `trace_layer_idx`.
  // With `router_run`, run_attention_and_router() has run its router (and set ready_s_).
  void run_moe_layer(int64_t step_idx, int32_t trace_layer_idx, int32_t source_layer_idx,
                     StepObserver* observer, bool router_run = false);
  // A layer's attention (of class `attn_class`) then the router of its MoE spec on every GPU, in
  // one pass, without an observer and with the token-op memo: the clocks as the two loops leave
  // them (the same additions per GPU in the same order), and their latest into ready_s_.
  void run_attention_and_router(int32_t attn_class, const MoeSpec& moe);
  // The draft passes of speculative decoding (set_draft_tokens), after the output head.
  void run_draft_passes(int64_t step_idx, const std::vector<std::vector<SeqSlice>>& ranks,
                        StepObserver* observer);
  void run_router(int32_t layer_idx, const MoeSpec& moe, StepObserver* observer);
  // Micro-batch timelines (schedule_ non-null; step_model.cc). Splits every rank's slices into
  // two micro-batches of about half its tokens and prices their attention per class.
  void split_microbatches(const std::vector<std::vector<SeqSlice>>& ranks);
  // The stage costs of MoE layer `layer_idx` (its routing drawn, src_dst_ / dst_selections_ and
  // the fast tier's state those of the whole batch) appended to region_.
  void price_microbatch_layer(int32_t layer_idx, const MoeSpec& moe, bool fast,
                              double& dispatch_bytes, double& combine_bytes);
  // Runs the priced MoE layers on the timeline and clears region_ (nothing when empty).
  void flush_microbatch_region(StepObserver* observer);
  // Draws the layer's routing into src_dst_ and refreshes experts_per_gpu_.
  void route(int64_t step_idx, int32_t moe_layer_idx);
  // Fills one MoE layer's row of result_.expert_loads (set_report_expert_loads).
  void record_expert_loads(int64_t step_idx, int32_t moe_layer_idx);
  // The fast tier's routing and collectives of one MoE layer (dispatch_s / combine_s and their
  // bytes); false (nothing changed) where the layer needs the exact tier.
  // Prices the layer's experts too (price_experts(moe)) where it returns true.
  bool run_fast_collectives(int64_t step_idx, int32_t moe_layer_idx, const MoeSpec& moe,
                            double& dispatch_s, double& combine_s, double& dispatch_bytes,
                            double& combine_bytes);
  // The fast tier's reach of a destination (rows per source token; fast_all_to_all.h) from its
  // selections and the sources' tokens.
  struct FastReach {
    int64_t top_k = 0;
    bool per_selection = false;  // low-latency dispatch: every selection is a row
    double of(double selections, double src_tokens) const;
  };
  // Refreshes experts_per_gpu_ / log1p_inv_experts_ from a MoE layer's placement (nothing when
  // it has the version last refreshed from).
  void refresh_slots(int32_t moe_layer_idx);
  // Unique tokens per (source, destination) into token_counts_; dst_selections_.
  void count_unique_tokens(int64_t top_k);
  // Background transfer chunks added to the dispatch traffic (traffic_).
  void add_background_traffic();
  // Routed + shared experts + combine seconds per GPU into ffn_s_; the imbalance sums and the
  // per-GPU balance of the layer.
  // With `reach`, also each destination's fast_reach_ from `reach_tokens` source tokens (the
  // fast tier's pass, fused).
  void price_experts(const MoeSpec& moe, bool record_balance = true,
                     const FastReach* reach = nullptr, double reach_tokens = 0);
  // The per-slot balance of one MoE layer into result_ (after route(); StepResult).
  void record_slot_balance(int64_t step_idx, int32_t moe_layer_idx);
  // `ready`: the latest clock (max of clock_s_), which the caller may know already.
  void advance_with_barriers(int32_t layer_idx, double dispatch_s, double combine_s, double ready,
                             StepObserver* observer);
  void advance_overlapped(int32_t layer_idx, double dispatch_s, double combine_s,
                          StepObserver* observer);
  void run_lm_head(const std::vector<std::vector<SeqSlice>>& ranks, StepObserver* observer);
  // Rounds the step's clocks and sums into result_; a HorizonError when the step ends past the
  // horizon (throw_step_beyond_horizon).
  void finish_step();
  [[noreturn]] void throw_step_beyond_horizon(double end_s) const;

  const ModelCard& card_;
  const Topology& topology_;
  DeploymentSpec deployment_;
  std::vector<GpuId> gpus_;
  const LayerPlacements* placements_ = nullptr;
  std::vector<BackgroundTransfer>* background_ = nullptr;
  double background_chunk_bytes_ = 0;
  CountMatrix src_expert_;
  ReplicaDispatcher dispatcher_;
  const CostModel& cost_;
  NetworkModel* network_;
  RoutingModel* routing_;
  bool report_loads_ = false;
  int32_t num_draft_tokens_ = 0;
  const ModelCard* draft_model_ = nullptr;
  // Seconds of one draft-model pass over `slices` (`tokens` of them) on one GPU.
  double draft_model_seconds(const std::vector<SeqSlice>& slices, int64_t tokens) const;
  bool in_draft_ = false;  // a draft pass runs: no expert loads, no routing to observers
  // Draft passes on the draft GPUs (set_draft_gpus); true when there were drafting sequences.
  bool run_remote_draft_passes(const std::vector<std::vector<SeqSlice>>& ranks,
                               StepObserver* observer);
  std::vector<GpuId> draft_gpus_;
  double draft_link_latency_s_ = 0;  // one way, replica GPU 0 -> first draft GPU
  std::vector<std::vector<SeqSlice>> draft_gpu_slices_;
  std::vector<double> draft_busy_s_;
  std::vector<SeqSlice> draft_slices_;
  int64_t step_tokens_ = 0;  // new tokens of the running step
  int32_t tp_ = 1;

  std::vector<LayerInfo> layers_;
  std::vector<AttentionSpec> attn_classes_;
  const MoeSpec* moe_ = nullptr;
  const FfnSpec* dense_ffn_ = nullptr;
  std::vector<int32_t> experts_per_gpu_;   // the placement's slots per GPU, as last seen
  std::vector<double> log1p_inv_experts_;  // log1p(-1 / experts_per_gpu_[g])
  uint64_t slots_version_ = 0;             // the placement version they were refreshed from
  // record_slot_balance's expected-share figures per MoE layer, kept while the layer's placement
  // and the routing's shares keep their versions.
  struct SlotBalance {
    uint64_t placement_version = 0, shares_version = 0;
    bool counted = false;  // the layer contributes (a positive max load)
    double imbalance = 0, balancedness = 0;
  };
  std::vector<SlotBalance> slot_balance_;
  double dispatch_row_bytes_ = 0;
  double combine_row_bytes_ = 0;
  KernelCost dispatch_kernel_, combine_kernel_;

  // Scratch reused across steps (no allocation on the hot path once grown).
  StepResult result_;
  std::vector<double> clock_s_;
  std::vector<double> compute_s_, comm_s_, wait_s_;  // per GPU, summed over the step
  std::vector<double> attn_s_;                       // per GPU x attention class
  std::vector<int64_t> gpu_tokens_;                  // tokens per GPU (MoE sources)
  std::vector<int64_t> rank_tokens_;                 // tokens per attention rank
  std::vector<int32_t> src_tokens_;
  std::vector<double> ffn_s_;
  double max_ffn_s_ = 0;  // the largest of ffn_s_, as price_experts() leaves them
  double ready_s_ = 0;    // run_attention_and_router()'s latest clock
  std::vector<double> routed_s_, shared_s_;  // price_experts(): routed + combine sum, shared
  // Per GPU, the seconds of the ops every MoE layer of a step repeats alike (router,
  // permutation, shared experts, combine): their work depends only on the GPU's tokens and the
  // layer's MoeSpec (the card's hidden size and precision are fixed), so they are kept for the
  // last (tokens, spec) and reused for equal ones unless the cost model counts its queries
  // (memo_allowed_; then every op is priced as it comes).
  struct TokenOpsMemo {
    int64_t tokens = -1;  // -1: nothing kept
    double router_permute = 0, shared = 0, combine = 0;
  };
  // Every GPU's memo is for token_ops_spec_: a layer with another spec drops them all (one
  // comparison per layer, not per GPU).
  void use_token_ops_spec(const MoeSpec& m) {
    if (token_ops_spec_ == m) return;
    token_ops_spec_ = m;
    for (TokenOpsMemo& memo : token_ops_memo_) memo.tokens = -1;
  }
  // The memo of GPU g for its current tokens and token_ops_spec_ (use_token_ops_spec(m) first).
  const TokenOpsMemo& token_ops(int32_t g, const MoeSpec& m) {
    const TokenOpsMemo& memo = token_ops_memo_[g];
    return memo.tokens == gpu_tokens_[g] ? memo : refresh_token_ops(g, m);
  }
  const TokenOpsMemo& refresh_token_ops(int32_t g, const MoeSpec& m);
  std::vector<TokenOpsMemo> token_ops_memo_;
  MoeSpec token_ops_spec_;
  // Routed-expert seconds of the first MoE layer's shape (moe_) by (selections, slots): a
  // direct-mapped table, kept across steps (a pure function of the two while memo_allowed_),
  // possibly shared with other replicas (share_expert_memo).
  using ExpertMemo = ExpertMemoTable::Entry;
  static constexpr int kExpertMemoBits = 14;
  static constexpr size_t kExpertMemoSize = size_t{1} << kExpertMemoBits;
  double expert_seconds(int64_t selections, int32_t slots, double log1p_inv_slots) {
    // One key for both (slots < 2^16, selections < 2^47, else not kept); consecutive selections
    // take consecutive entries, as a step's GPUs draw counts close to each other.
    if (!memo_allowed_ || slots >= (1 << 16) || selections >= (int64_t{1} << 47)) {
      return price_expert_seconds(selections, slots, log1p_inv_slots);
    }
    const auto key = static_cast<int64_t>((static_cast<uint64_t>(selections) << 16) |
                                          static_cast<uint64_t>(slots));
    ExpertMemo& e = expert_memo_entries_[static_cast<size_t>(selections + 2053 * slots) &
                                         (kExpertMemoSize - 1)];
    if (e.key != key) {
      e.seconds = price_expert_seconds(selections, slots, log1p_inv_slots);
      e.key = key;
    }
    return e.seconds;
  }
  double price_expert_seconds(int64_t selections, int32_t slots, double log1p_inv_slots);
  std::shared_ptr<ExpertMemoTable> expert_memo_;
  ExpertMemo* expert_memo_entries_ = nullptr;  // expert_memo_->entries.data()
  bool memo_allowed_ = false;                  // !cost_.counts_queries(), asked once
  // Micro-batch timelines.
  const MicrobatchSchedule* schedule_ = nullptr;
  std::array<std::vector<std::vector<SeqSlice>>, 2> mb_ranks_;  // per micro-batch, per rank
  std::array<std::vector<int64_t>, 2> mb_gpu_tokens_;           // per micro-batch, per GPU
  // Per micro-batch, per GPU x attention class: attention seconds and its projections' share.
  std::array<std::vector<double>, 2> mb_attn_s_, mb_attn_prep_share_;
  std::vector<LayerStageCosts> region_;  // MoE layers priced, not yet timed (region_size_ used)
  size_t region_size_ = 0;
  CountMatrix mb_src_dst_;
  std::vector<int64_t> whole_dst_selections_;
  std::vector<TimelineSpan> spans_;
  TimelineTotals timeline_totals_;
  CountMatrix src_dst_;
  TokenCounts token_counts_;
  std::vector<int32_t> node_limit_scratch_;
  TrafficPlan plan_;
  TrafficMatrix traffic_;
  CollectiveResult collective_;
  std::vector<int64_t> dst_selections_;
  // Host-link contention (set_nic_slowdown, set_track_nic_bytes).
  void find_nic_links();
  // Adds the last exact collective's NIC bytes (network_->link_bytes()) to result_.
  void add_exact_nic_bytes();
  bool track_nic_bytes_ = false;
  std::vector<int32_t> nic_in_link_, nic_out_link_;         // per replica GPU, -1 without a NIC
  std::vector<double> nic_in_slowdown_, nic_out_slowdown_;  // per replica GPU; empty: none
  std::vector<double> link_slowdown_;                       // per link id, for network_
  // Fast tier.
  bool fast_tier_ = false;
  std::unique_ptr<FastAllToAll> fast_;
  std::vector<double> fast_tokens_, fast_reach_, fast_remote_reach_;
  // gpu_tokens_ changes bump tokens_version_; fast_tokens_ (gpu_tokens_ as doubles) and
  // fast_token_sum_ are those of fast_tokens_version_ (fill_fast_tokens()).
  uint64_t tokens_version_ = 1, fast_tokens_version_ = 0;
  int64_t fast_token_sum_ = 0;
  void fill_fast_tokens();
  std::vector<int64_t> expert_totals_, node_tokens_, local_selections_, group_tokens_;
  std::vector<int32_t> group_node_;
};

}  // namespace moesim::sim
