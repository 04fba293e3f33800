// The Backend interface: everything the replay and the bench need from an execution device.
//
// Backends: "cpu" (engine/cpu/, Eigen, the reference every kernel is tested against) and "cuda"
// (engine/cuda/, kernels + cuBLAS + NCCL; registered only when compiled). make_backend() picks
// one by name. Every operation follows one set of conventions: row-major contiguous tensors,
// weights stored [in, out], BF16 with FP32 accumulation unless stated, optional FP8 E4M3 routed
// experts (W8A8), asynchronous execution until synchronize(), shape errors as bugs and allocation
// failure as OutOfMemoryError. docs/engine.md ("Backends") states them in full, with the
// attention batches' cache layout and the RoPE form.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/communicator.h"
#include "engine/dtype.h"
#include "engine/tensor.h"

namespace moesim::engine {

// ---- Errors ------------------------------------------------------------------------------------

// A device (or the CPU backend's memory limit) cannot hold a requested allocation.
class OutOfMemoryError : public std::runtime_error {
 public:
  OutOfMemoryError(const std::string& what_for, int64_t requested_bytes, int64_t available_bytes);
  int64_t requested_bytes() const { return requested_bytes_; }
  int64_t available_bytes() const { return available_bytes_; }

 private:
  int64_t requested_bytes_;
  int64_t available_bytes_;
};

// The named backend exists but cannot run here (not compiled in, or no device present). Tests
// skip on it; moesim-engine reports it and exits with code 1.
class BackendUnavailableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- Device description ------------------------------------------------------------------------

// Peak figures of the device; nullopt when unknown (the CPU backend unless given on the command
// line). FLOP/s count 2 per multiply-accumulate, dense (no sparsity).
struct DevicePeaks {
  std::optional<double> bf16_flops_per_s;
  std::optional<double> fp8_flops_per_s;
  std::optional<double> fp32_flops_per_s;
  std::optional<double> memory_bytes_per_s;  // HBM (DRAM for the CPU)
};

struct MemoryInfo {
  int64_t capacity_bytes = 0;   // total device memory (CPU: the memory limit)
  int64_t available_bytes = 0;  // what allocate() can still hand out now
};

// ---- Operation parameters ----------------------------------------------------------------------

// The sequences of one attention call (host-side metadata; a device backend uploads what it
// needs). new_tokens[s] >= 1, context_tokens[s] >= 0, both of size num_sequences().
struct AttentionBatch {
  std::vector<int64_t> new_tokens;
  std::vector<int64_t> context_tokens;

  int64_t num_sequences() const { return static_cast<int64_t>(new_tokens.size()); }
  // Sum of new_tokens: the rows of x and out.
  int64_t total_new_tokens() const;
  // Sum of context_tokens + new_tokens: the rows of the caches.
  int64_t total_cache_rows() const;
  // First cache row of sequence s (sum over r < s of context + new).
  int64_t cache_row_offset(int64_t s) const;
  // First row of x of sequence s (sum over r < s of new).
  int64_t token_row_offset(int64_t s) const;
};

// Multi-head latent attention shapes (DeepSeek-V2/V3, Kimi-K2).
struct MlaShape {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t q_lora_rank = 0;  // 0: queries projected directly from the hidden state
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
};

// MLA weights. Per head h, the q_b columns [h*(nope+rope), ...) are the head's nope part then
// its rope part; the kv_b columns [h*(nope+v), ...) are the head's key up-projection W_UK (nope
// columns) then its value up-projection W_UV (v columns).
struct MlaWeights {
  MlaShape shape;
  Tensor w_q_a;      // [hidden, q_lora_rank]; empty when q_lora_rank == 0
  Tensor q_a_norm;   // [q_lora_rank] RMSNorm weight; empty when q_lora_rank == 0
  Tensor w_q_b;      // [q_lora_rank or hidden, heads * (nope + rope)]
  Tensor w_kv_a;     // [hidden, kv_lora_rank + rope]: latent then the shared rotary key
  Tensor kv_a_norm;  // [kv_lora_rank] RMSNorm weight applied to the latent before caching
  Tensor w_kv_b;     // [kv_lora_rank, heads * (nope + v)]
  Tensor w_o;        // [heads * v, hidden]
};

// How MLA attends over the latent cache. Both are exact rewrites of each other.
//   kNaive: up-project every cached latent to per-head keys (nope) and values, then standard
//     attention with keys [k_nope, k_rope] (what prefill kernels do).
//   kAbsorbed: fold W_UK into the query (q_lat = q_nope W_UK^T, kv_lora_rank wide) and W_UV
//     into the output; attention runs directly on the cached latents (what decode kernels do).
// The replay uses kNaive for prefill sequences and kAbsorbed for decode sequences.
enum class MlaForm { kNaive, kAbsorbed };

// Grouped-query attention (MHA: num_kv_heads == num_heads). Head h of the query uses KV head
// h / (num_heads / num_kv_heads).
struct GqaShape {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool qk_norm = false;  // per-head RMSNorm on q and k before RoPE (Qwen3)
};

struct GqaWeights {
  GqaShape shape;
  Tensor w_q;     // [hidden, heads * d]
  Tensor w_k;     // [hidden, kv_heads * d]
  Tensor w_v;     // [hidden, kv_heads * d]
  Tensor w_o;     // [heads * d, hidden]
  Tensor q_norm;  // [d]; empty unless qk_norm
  Tensor k_norm;  // [d]; empty unless qk_norm
};

// Kimi Delta Attention (Kimi Linear) shapes.
struct KdaShape {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  int64_t short_conv_kernel = 4;  // taps of the causal depthwise convolutions on q, k, v (>= 1)
  int64_t gate_lora_rank = 0;     // rank r of the forget / output gate projections (>= 1)
  bool output_gate = true;
};

// KDA weights. Per token t and head h (dk = head_dim_k, dv = head_dim_v):
//   q, k, v = causal depthwise conv (short_conv_kernel taps, tap 0 oldest) of x W_q, x W_k,
//             x W_v, then SiLU; q and k are L2-normalised per head and q scaled by dk^-1/2;
//   alpha_t = exp(-exp(a_log[h]) * softplus((x W_f_a W_f_b)[h] + dt_bias[h])) in (0, 1)^dk;
//   beta_t = sigmoid((x W_beta)[h]);
//   S_t = (I - beta_t k_t k_t^T) Diag(alpha_t) S_{t-1} + beta_t k_t v_t^T   (S is dk x dv);
//   o_t = S_t^T q_t;  y = RMSNorm(o_t; o_norm) * sigmoid((x W_g_a W_g_b)[h]) (when output_gate);
//   out = y W_o over all heads.
struct KdaWeights {
  KdaShape shape;
  Tensor w_q;      // [hidden, heads * dk]
  Tensor w_k;      // [hidden, heads * dk]
  Tensor w_v;      // [hidden, heads * dv]
  Tensor conv_q;   // [kernel, heads * dk]
  Tensor conv_k;   // [kernel, heads * dk]
  Tensor conv_v;   // [kernel, heads * dv]
  Tensor w_f_a;    // [hidden, r]
  Tensor w_f_b;    // [r, heads * dk]
  Tensor w_beta;   // [hidden, heads]
  Tensor w_g_a;    // [hidden, r]; empty unless output_gate
  Tensor w_g_b;    // [r, heads * dv]; empty unless output_gate
  Tensor a_log;    // [heads] FP32
  Tensor dt_bias;  // [heads * dk] FP32
  Tensor o_norm;   // [dv]
  Tensor w_o;      // [heads * dv, hidden]
};

// The per-sequence state of a KDA layer, sequences in AttentionBatch order.
//   recurrent: [num_sequences, heads, dk, dv] FP32 (S above).
//   conv: [num_sequences, kernel - 1, heads * (2 dk + dv)] FP32: the last kernel - 1 projected
//     inputs (q channels, then k, then v), oldest first; zeros for a fresh sequence.
struct KdaState {
  Tensor recurrent;
  Tensor conv;
};

enum class ScoringFunc { kSoftmax, kSigmoid };

// Router scoring. Softmax: probabilities over all experts, top-k by probability, weights the
// top-k probabilities (renormalised to sum 1 when normalize_top_k). Sigmoid (DeepSeek-V3):
// scores sigmoid(logit), top-k by score + bias, weights the top-k scores (renormalised when
// normalize_top_k). Ties pick the lower expert index. Weights are then multiplied by
// routed_scaling.
struct RouterConfig {
  int64_t num_experts = 0;
  int64_t top_k = 0;
  ScoringFunc scoring = ScoringFunc::kSoftmax;
  bool normalize_top_k = true;
  float routed_scaling = 1.0f;
};

struct RouterWeights {
  Tensor w_gate;  // [hidden, num_experts]
  Tensor bias;    // [num_experts] FP32 score-correction bias (sigmoid only); empty when none
};

// Gated (SwiGLU) FFN weights for num_experts experts (1 for a dense FFN or a shared expert):
// out = (silu(x W_gate) * (x W_up)) W_down. gate_up[e] holds W_gate in columns [0, I) and W_up
// in columns [I, 2I). BF16, or FP8 E4M3 with the FP32 scales below.
struct FfnWeights {
  int64_t num_experts = 1;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  Tensor gate_up;        // [num_experts, hidden, 2 * intermediate]
  Tensor down;           // [num_experts, intermediate, hidden]
  Tensor gate_up_scale;  // [num_experts] FP32; empty unless FP8
  Tensor down_scale;     // [num_experts] FP32; empty unless FP8
};

// How a multi-rank backend finds its peers.
//   communicator: an in-process group (engine/cpu/thread_communicator.h) whose rank() and
//     world_size() equal rank and world_size. The CPU backend's only multi-rank mode; the
//     other fields below are then unused.
//   Otherwise (NCCL, the CUDA backend):
//   unique_id_file: shared-file bootstrap. Rank 0 writes the NCCL unique id to this path
//     (atomically: write a temporary file, then rename); other ranks poll for it up to
//     timeout_s. Empty: the launcher (MPI) provides rank and world size and the id is broadcast
//     over MPI when the backend was built with MPI; otherwise an error.
struct DistributedConfig {
  int rank = 0;
  int world_size = 1;
  int local_device_idx = 0;  // device ordinal on this host
  std::string unique_id_file;
  double timeout_s = 120.0;
  std::shared_ptr<Communicator> communicator;  // shared with the other ranks' copies
};

// Measures elapsed device time between start() and stop() (CUDA events on GPUs,
// std::chrono::steady_clock on the CPU).
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  // Nanoseconds between the last start() and stop(); waits for the stop point to complete.
  virtual int64_t elapsed_ns() = 0;
};

// ---- The interface -----------------------------------------------------------------------------

class Backend {
 public:
  virtual ~Backend() = default;

  // Registry name: "cpu", "cuda".
  virtual std::string name() const = 0;
  // Human-readable device, e.g. "NVIDIA H200" or the CPU model name.
  virtual std::string device_name() const = 0;
  virtual DevicePeaks peaks() const = 0;
  virtual MemoryInfo memory_info() const = 0;
  // Whether routed-expert FFNs can run with `weight_dtype` (kBF16 always; kFP8E4M3 where the
  // device has FP8 tensor cores; the CPU emulates it and says yes).
  virtual bool supports_expert_dtype(DType weight_dtype) const = 0;

  // ---- Memory ----
  // Allocates an uninitialised tensor. Throws OutOfMemoryError (naming `what_for`, the bytes
  // requested and available) when the device cannot hold it.
  virtual DeviceTensor allocate(DType dtype, const Shape& shape, std::string_view what_for) = 0;
  // Copies dst.size_bytes() bytes from host memory (same dtype layout) into dst. Synchronous.
  virtual void upload(const void* host_src, const Tensor& dst) = 0;
  // Copies src.size_bytes() bytes into host memory. Synchronous.
  virtual void download(const Tensor& src, void* host_dst) = 0;
  // Fills dst with synthetic_value(seed, i) * scale (engine/synthetic.h) rounded to dst's dtype,
  // i the flat element index: every backend produces the same bits. dst must be a float dtype.
  virtual void fill_synthetic(const Tensor& dst, uint64_t seed, float scale) = 0;

  // ---- Operations ----
  // out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight. x, out [T, H]; weight [H].
  virtual void rmsnorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) = 0;

  // MLA attention of one batch, projections included. x [T, hidden] (the normalised hidden
  // state), latent_cache [batch.total_cache_rows(), kv_lora_rank + rope] (RMS-normalised latent,
  // then the rotated shared key), out [T, hidden]. Softmax scale (nope + rope)^-1/2.
  virtual void mla_attention(const MlaWeights& w, const AttentionBatch& batch, MlaForm form,
                             const Tensor& x, const Tensor& latent_cache, const Tensor& out) = 0;

  // GQA attention of one batch, projections included. x [T, hidden]; k_cache and v_cache
  // [batch.total_cache_rows(), kv_heads * d]; out [T, hidden]. Softmax scale d^-1/2.
  virtual void gqa_attention(const GqaWeights& w, const AttentionBatch& batch, const Tensor& x,
                             const Tensor& k_cache, const Tensor& v_cache, const Tensor& out) = 0;

  // KDA of one batch, projections included: reads and advances `state` over the new tokens.
  // x [T, hidden], out [T, hidden]. The CPU runs the token-by-token recurrence; device kernels
  // may use the chunked form (same result up to rounding).
  virtual void kda_attention(const KdaWeights& w, const AttentionBatch& batch, const Tensor& x,
                             const KdaState& state, const Tensor& out) = 0;

  // Router: logits = x W_gate in FP32, then scoring and top-k per RouterConfig.
  // x [T, hidden]; expert_ids [T, top_k] I32 (descending weight order); expert_weights
  // [T, top_k] FP32.
  virtual void router(const Tensor& x, const RouterWeights& w, const RouterConfig& config,
                      const Tensor& expert_ids, const Tensor& expert_weights) = 0;

  // Gather: out[i] = x[gather_rows[i]]. x [T, H]; gather_rows [N] I32 in [0, T); out [N, H].
  // With the rows of a Permutation (engine/permutation.h) this groups token copies by expert.
  virtual void permute(const Tensor& x, const Tensor& gather_rows, const Tensor& out) = 0;

  // Scatter: out[scatter_rows[i]] = x[i]. x [N, H]; scatter_rows [N] I32, a permutation of
  // [0, N); out [N, H]. Undoes permute into slot order (token t's j-th choice at t * top_k + j).
  virtual void unpermute(const Tensor& x, const Tensor& scatter_rows, const Tensor& out) = 0;

  // Grouped SwiGLU FFN: rows [o_e, o_e + tokens_per_expert[e]) of x go through expert e, with
  // o_e the prefix sum. x [N, hidden] with N = sum(tokens_per_expert) (BF16); out [N, hidden]
  // BF16. tokens_per_expert has w.num_experts entries (zeros allowed). The activation between
  // the two GEMMs is rounded to BF16 (FP8 weights: quantised per row to FP8). Dense FFNs and
  // shared experts are the one-expert case.
  virtual void expert_ffn(const Tensor& x, const std::vector<int64_t>& tokens_per_expert,
                          const FfnWeights& w, const Tensor& out) = 0;

  // out[t] = sum_j weights[t, j] * expert_out[t, j] (+ shared_out[t] when not empty).
  // expert_out [T, top_k, H] (slot order); weights [T, top_k] FP32; shared_out empty or [T, H];
  // out [T, H].
  virtual void weighted_combine(const Tensor& expert_out, const Tensor& weights,
                                const Tensor& shared_out, const Tensor& out) = 0;

  // ---- Collectives ----
  // Joins a group of ranks. Throws BackendUnavailableError when the backend cannot (the CPU
  // backend with world_size > 1 and no in-process communicator; a CUDA build without NCCL).
  virtual void init_distributed(const DistributedConfig& config) = 0;
  virtual int world_size() const = 0;
  virtual int rank() const = 0;
  // All-to-all of rows: this rank sends send_rows_per_rank[r] consecutive rows of `send` to
  // rank r and receives recv_rows_per_rank[r] rows from rank r into `recv`, both in rank order.
  // Returns false (nothing sent) when the backend cannot exchange with other ranks, e.g. a
  // single-rank group: the replay then records the all-to-all as not measured.
  virtual bool all_to_all(const Tensor& send, const std::vector<int64_t>& send_rows_per_rank,
                          const Tensor& recv, const std::vector<int64_t>& recv_rows_per_rank) = 0;

  // ---- Synchronisation and timing ----
  // Waits for all queued work.
  virtual void synchronize() = 0;
  virtual std::unique_ptr<Timer> make_timer() = 0;
  // The timer of a collective: waiting for the peers is part of an exchange, so a backend whose
  // make_timer() counts only the calling thread's CPU time times collectives by wall clock.
  virtual std::unique_ptr<Timer> make_collective_timer() { return make_timer(); }
  // Host threads besides the caller that run this backend's operations (the CPU backend's
  // OpenMP workers), as kernel thread ids: timing records their run-queue wait and may pin them
  // (engine/timing.h). Empty by default.
  virtual std::vector<int> worker_thread_ids() { return {}; }
};

// ---- Registry ----------------------------------------------------------------------------------

// Options make_backend passes to the backend it creates (each backend uses what applies to it).
struct BackendOptions {
  // CPU: the memory allocate() may hand out in total; nullopt = 80% of the RAM available at
  // creation (MemAvailable). Devices ignore it (they report their own free memory).
  std::optional<int64_t> memory_limit_bytes;
};

// Creates the backend called `name`: "cpu" always; "cuda" when engine/cuda was compiled (its
// factory is moesim::engine::cuda::make_cuda_backend() from engine/cuda/cuda_backend.h).
// Throws std::invalid_argument listing the valid names for an unknown name, and
// BackendUnavailableError for a known backend that cannot run here.
std::unique_ptr<Backend> make_backend(std::string_view name);
std::unique_ptr<Backend> make_backend(std::string_view name, const BackendOptions& options);
// Names make_backend accepts in this build, sorted.
std::vector<std::string> backend_names();

// ---- Host helpers ------------------------------------------------------------------------------

// Allocates a tensor of `dtype` and uploads `values` converted to it (rounded to nearest even).
// values.size() must equal the shape's element count; dtype must be a float dtype.
DeviceTensor upload_floats(Backend& backend, const std::vector<float>& values, DType dtype,
                           const Shape& shape, std::string_view what_for);
// Allocates an I32 tensor holding `values`.
DeviceTensor upload_ints(Backend& backend, const std::vector<int32_t>& values, const Shape& shape,
                         std::string_view what_for);
// Downloads a float-dtype tensor and converts it to FP32.
std::vector<float> download_floats(Backend& backend, const Tensor& src);
// Downloads an I32 tensor.
std::vector<int32_t> download_ints(Backend& backend, const Tensor& src);

}  // namespace moesim::engine
