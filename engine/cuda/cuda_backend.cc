// CUDA backend: each Backend operation is a short sequence of launchers (engine/cuda/
// launchers.h) and GEMMs (engine/cuda/expert_gemm.h) on one stream. Temporaries come from the
// stream-ordered allocator (cudaMallocAsync / cudaFreeAsync), so operations never synchronise
// the device and timings measure the work, not allocation. Per-call metadata (positions, cache
// offsets) is computed on the host and copied with cudaMemcpyAsync.
#include "engine/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "base/check.h"
#include "engine/cuda/check.h"
#include "engine/cuda/expert_gemm.h"
#include "engine/cuda/launchers.h"
#if defined(MOESIM_ENGINE_CUDA_HAVE_NCCL)
#include "engine/cuda/nccl_communicator.h"
#endif

namespace moesim::engine::cuda {
namespace {

constexpr float kInnerNormEps = 1e-6f;  // matches engine/cpu/attend.h

// Typed views: a tensor of another dtype (e.g. an FP32 attention dtype, which the CPU backend
// accepts) is reported, not reinterpreted.
bf16* as_bf16(const Tensor& t) {
  MOESIM_CHECK(t.empty() || t.dtype == DType::kBF16, "cuda backend: tensor must be BF16");
  return static_cast<bf16*>(t.data);
}
float* as_f32(const Tensor& t) {
  MOESIM_CHECK(t.empty() || t.dtype == DType::kF32, "cuda backend: tensor must be FP32");
  return static_cast<float*>(t.data);
}
int as_int(int64_t v) {
  MOESIM_CHECK(v >= 0 && v <= 0x7fffffff, "dimension does not fit in int");
  return static_cast<int>(v);
}

class CudaTimer : public Timer {
 public:
  explicit CudaTimer(cudaStream_t stream) : stream_(stream) {
    MOESIM_CUDA_CHECK(cudaEventCreate(&start_));
    MOESIM_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~CudaTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start() override { MOESIM_CUDA_CHECK(cudaEventRecord(start_, stream_)); }
  void stop() override { MOESIM_CUDA_CHECK(cudaEventRecord(stop_, stream_)); }
  int64_t elapsed_ns() override {
    MOESIM_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    MOESIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return std::llround(static_cast<double>(ms) * 1e6);
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// Transposed FP8 expert weights ([out, in], what cuBLASLt FP8 needs), keyed by the source
// tensor's address. Entries are dropped when the backend frees the source allocation.
struct TransposedWeightCache {
  std::map<const void*, DeviceBuffer> entries;
  void drop_range(const void* begin, int64_t size_bytes) {
    const auto* lo = static_cast<const char*>(begin);
    entries.erase(entries.lower_bound(lo), entries.lower_bound(lo + size_bytes));
  }
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int device) { set_device(device); }

  ~CudaBackend() override {
    gemm_.reset();
    weight_cache_->entries.clear();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  std::string device_name() const override { return prop_.name; }

  DevicePeaks peaks() const override {
    DevicePeaks p;
    const std::string n = prop_.name;
    if (n.find("H200") != std::string::npos) {
      p.bf16_flops_per_s = 989e12;
      p.fp8_flops_per_s = 1979e12;
      p.fp32_flops_per_s = 67e12;
      p.memory_bytes_per_s = 4.8e12;
    } else if (n.find("H100") != std::string::npos) {
      p.bf16_flops_per_s = 989e12;
      p.fp8_flops_per_s = 1979e12;
      p.fp32_flops_per_s = 67e12;
      p.memory_bytes_per_s = 3.35e12;
    }
    return p;
  }

  MemoryInfo memory_info() const override {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    MOESIM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return MemoryInfo{static_cast<int64_t>(total_bytes), static_cast<int64_t>(free_bytes)};
  }

  bool supports_expert_dtype(DType weight_dtype) const override {
    if (weight_dtype == DType::kBF16) return true;
    if (weight_dtype == DType::kFP8E4M3) {
      return prop_.major > 8 || (prop_.major == 8 && prop_.minor >= 9);
    }
    return false;
  }

  DeviceTensor allocate(DType dtype, const Shape& shape, std::string_view what_for) override {
    const int64_t bytes = shape_size_bytes(shape, dtype_size_bytes(dtype));
    void* data = device_malloc(bytes, what_for);
    std::shared_ptr<TransposedWeightCache> cache = weight_cache_;
    DeviceBuffer buffer(data, bytes, [cache, bytes](void* p) {
      cache->drop_range(p, bytes);
      cudaFree(p);  // deleter: failure cannot be reported
    });
    return DeviceTensor{std::move(buffer), Tensor{data, dtype, shape}};
  }

  // On stream_, then wait: a cudaMemcpy (legacy stream, unordered with the non-blocking stream_)
  // from pageable memory may return before the bytes land, racing the next kernel on stream_.
  void upload(const void* host_src, const Tensor& dst) override {
    if (dst.size_bytes() == 0) return;
    MOESIM_CUDA_CHECK(cudaMemcpyAsync(dst.data, host_src, static_cast<size_t>(dst.size_bytes()),
                                      cudaMemcpyHostToDevice, stream_));
    MOESIM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void download(const Tensor& src, void* host_dst) override {
    if (src.size_bytes() == 0) return;
    MOESIM_CUDA_CHECK(cudaMemcpyAsync(host_dst, src.data, static_cast<size_t>(src.size_bytes()),
                                      cudaMemcpyDeviceToHost, stream_));
    MOESIM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void fill_synthetic(const Tensor& dst, uint64_t seed, float scale) override {
    int code = 0;
    switch (dst.dtype) {
      case DType::kF32:
        code = 0;
        break;
      case DType::kBF16:
        code = 1;
        break;
      case DType::kFP8E4M3:
        code = 2;
        break;
      case DType::kI32:
        MOESIM_CHECK(false, "fill_synthetic: I32 is not a float dtype");
    }
    launch_fill_synthetic(dst.data, code, dst.num_elements(), seed, scale, stream_);
  }

  void rmsnorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    MOESIM_CHECK(x.shape == out.shape && weight.num_elements() == x.cols(), "rmsnorm: shapes");
    launch_rmsnorm(as_bf16(x), x.cols(), as_bf16(weight), as_bf16(out), out.cols(), x.rows(),
                   as_int(x.cols()), eps, stream_);
  }

  void mla_attention(const MlaWeights& w, const AttentionBatch& batch, MlaForm form,
                     const Tensor& x, const Tensor& latent_cache, const Tensor& out) override;
  void gqa_attention(const GqaWeights& w, const AttentionBatch& batch, const Tensor& x,
                     const Tensor& k_cache, const Tensor& v_cache, const Tensor& out) override;
  void kda_attention(const KdaWeights& w, const AttentionBatch& batch, const Tensor& x,
                     const KdaState& state, const Tensor& out) override;

  void router(const Tensor& x, const RouterWeights& w, const RouterConfig& config,
              const Tensor& expert_ids, const Tensor& expert_weights) override {
    const int64_t tokens = x.rows();
    const int experts = as_int(config.num_experts);
    DeviceBuffer logits = scratch(tokens * experts * 4, "router logits");
    router_logits(gemm_->handle(), as_bf16(x), as_bf16(w.w_gate),
                  static_cast<float*>(logits.data()), tokens, as_int(x.cols()), experts, stream_);
    // The correction bias applies to sigmoid scoring only (RouterConfig; the CPU ignores it else).
    const bool biased = config.scoring == ScoringFunc::kSigmoid && !w.bias.empty();
    launch_router_topk(
        static_cast<float*>(logits.data()), biased ? as_f32(w.bias) : nullptr,
        config.scoring == ScoringFunc::kSoftmax ? RouterScoring::kSoftmax : RouterScoring::kSigmoid,
        config.normalize_top_k, config.routed_scaling, static_cast<int32_t*>(expert_ids.data),
        as_f32(expert_weights), tokens, experts, as_int(config.top_k), stream_);
  }

  void permute(const Tensor& x, const Tensor& gather_rows, const Tensor& out) override {
    launch_permute_rows(as_bf16(x), static_cast<const int32_t*>(gather_rows.data), as_bf16(out),
                        out.rows(), as_int(x.cols()), stream_);
  }

  void unpermute(const Tensor& x, const Tensor& scatter_rows, const Tensor& out) override {
    launch_unpermute_rows(as_bf16(x), static_cast<const int32_t*>(scatter_rows.data), as_bf16(out),
                          x.rows(), as_int(x.cols()), stream_);
  }

  void expert_ffn(const Tensor& x, const std::vector<int64_t>& tokens_per_expert,
                  const FfnWeights& w, const Tensor& out) override;

  void weighted_combine(const Tensor& expert_out, const Tensor& weights, const Tensor& shared_out,
                        const Tensor& out) override {
    const int64_t tokens = out.rows();
    launch_weighted_combine(as_bf16(expert_out), nullptr, as_f32(weights),
                            shared_out.empty() ? nullptr : as_bf16(shared_out), as_bf16(out),
                            tokens, as_int(weights.cols()), as_int(out.cols()), stream_);
  }

  void init_distributed(const DistributedConfig& config) override {
    if (config.world_size == 1) {
      rank_ = 0;
      world_size_ = 1;
      return;
    }
#if defined(MOESIM_ENGINE_CUDA_HAVE_NCCL)
    set_device(config.local_device_idx);
    if (!config.unique_id_file.empty()) {
      comm_ = NcclCommunicator::create_with_file(config.unique_id_file, config.rank,
                                                 config.world_size, config.timeout_s);
    } else {
#if defined(MOESIM_HAVE_MPI)
      comm_ = NcclCommunicator::create_with_mpi();
#else
      throw BackendUnavailableError(
          "cuda: no unique_id_file given and this build has no MPI bootstrap");
#endif
    }
    comm_->set_stream(stream_);
    rank_ = comm_->rank();
    world_size_ = comm_->world_size();
#else
    throw BackendUnavailableError("cuda: built without NCCL; world_size must be 1");
#endif
  }
  int world_size() const override { return world_size_; }
  int rank() const override { return rank_; }

  bool all_to_all(const Tensor& send, const std::vector<int64_t>& send_rows_per_rank,
                  const Tensor& recv, const std::vector<int64_t>& recv_rows_per_rank) override {
#if defined(MOESIM_ENGINE_CUDA_HAVE_NCCL)
    if (comm_ == nullptr || world_size_ < 2) return false;
    const int64_t row_bytes = dtype_size_bytes(send.dtype) * send.cols();
    std::vector<int64_t> send_bytes(send_rows_per_rank.size());
    std::vector<int64_t> recv_bytes(recv_rows_per_rank.size());
    for (size_t r = 0; r < send_bytes.size(); ++r)
      send_bytes[r] = send_rows_per_rank[r] * row_bytes;
    for (size_t r = 0; r < recv_bytes.size(); ++r)
      recv_bytes[r] = recv_rows_per_rank[r] * row_bytes;
    comm_->all_to_all_bytes(send.data, send_bytes, recv.data, recv_bytes, stream_);
    return true;
#else
    return false;
#endif
  }

  void synchronize() override { MOESIM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  std::unique_ptr<Timer> make_timer() override { return std::make_unique<CudaTimer>(stream_); }

 private:
  // cudaMalloc of `bytes` (nullptr for 0); OutOfMemoryError naming `what_for` when it fails.
  void* device_malloc(int64_t bytes, std::string_view what_for) const {
    void* data = nullptr;
    if (bytes <= 0) return data;
    const cudaError_t result = cudaMalloc(&data, static_cast<size_t>(bytes));
    if (result == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the error so later calls do not see it
      throw OutOfMemoryError(std::string(what_for), bytes, memory_info().available_bytes);
    }
    MOESIM_CUDA_CHECK(result);
    return data;
  }

  void set_device(int device) {
    if (stream_ != nullptr && device == device_) return;
    gemm_.reset();
    if (stream_ != nullptr) MOESIM_CUDA_CHECK(cudaStreamDestroy(stream_));
    stream_ = nullptr;
    device_ = device;
    MOESIM_CUDA_CHECK(cudaSetDevice(device_));
    MOESIM_CUDA_CHECK(cudaGetDeviceProperties(&prop_, device_));
    MOESIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // Keep freed scratch in the pool instead of returning it to the driver at each sync.
    cudaMemPool_t pool = nullptr;
    MOESIM_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_));
    uint64_t threshold = UINT64_MAX;
    MOESIM_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    gemm_ = std::make_unique<ExpertGemm>();
  }

  // Stream-ordered temporary of `bytes` bytes, freed (stream-ordered) when the buffer dies.
  DeviceBuffer scratch(int64_t bytes, std::string_view what_for) {
    void* data = nullptr;
    if (bytes <= 0) return DeviceBuffer();
    const cudaError_t result = cudaMallocAsync(&data, static_cast<size_t>(bytes), stream_);
    if (result == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw OutOfMemoryError(std::string(what_for), bytes, memory_info().available_bytes);
    }
    MOESIM_CUDA_CHECK(result);
    cudaStream_t stream = stream_;
    return DeviceBuffer(data, bytes, [stream](void* p) { cudaFreeAsync(p, stream); });
  }

  DeviceBuffer upload_ints_async(const std::vector<int32_t>& values, std::string_view what_for) {
    DeviceBuffer buffer = scratch(static_cast<int64_t>(values.size()) * 4, what_for);
    if (!values.empty()) {
      MOESIM_CUDA_CHECK(cudaMemcpyAsync(buffer.data(), values.data(), values.size() * 4,
                                        cudaMemcpyHostToDevice, stream_));
    }
    return buffer;
  }

  void linear_into(const bf16* x, const Tensor& w, void* y, int64_t rows, bool y_fp32 = false,
                   int64_t x_row_stride = 0) {
    linear(gemm_->handle(), x, as_bf16(w), y, y_fp32, rows, as_int(w.dim(0)), as_int(w.dim(1)),
           stream_, x_row_stride);
  }

  // Per-sequence and per-token metadata of an attention batch, on the device.
  struct BatchMeta {
    DeviceBuffer token_start, num_new, num_ctx, cache_start;                   // [sequences]
    DeviceBuffer positions, token_cache_row, token_cache_start, token_kv_len;  // [tokens]
    int max_new = 0;
  };
  BatchMeta upload_batch(const AttentionBatch& batch) {
    std::vector<int32_t> token_start, num_new, num_ctx, cache_start;
    std::vector<int32_t> positions, token_cache_row, token_cache_start, token_kv_len;
    BatchMeta meta;
    for (int64_t s = 0; s < batch.num_sequences(); ++s) {
      const int64_t n = batch.new_tokens[s];
      const int64_t ctx = batch.context_tokens[s];
      const int64_t cache0 = batch.cache_row_offset(s);
      token_start.push_back(as_int(batch.token_row_offset(s)));
      num_new.push_back(as_int(n));
      num_ctx.push_back(as_int(ctx));
      cache_start.push_back(as_int(cache0));
      meta.max_new = std::max(meta.max_new, as_int(n));
      for (int64_t i = 0; i < n; ++i) {
        positions.push_back(as_int(ctx + i));
        token_cache_row.push_back(as_int(cache0 + ctx + i));
        token_cache_start.push_back(as_int(cache0));
        token_kv_len.push_back(as_int(ctx + i + 1));
      }
    }
    meta.token_start = upload_ints_async(token_start, "attention metadata");
    meta.num_new = upload_ints_async(num_new, "attention metadata");
    meta.num_ctx = upload_ints_async(num_ctx, "attention metadata");
    meta.cache_start = upload_ints_async(cache_start, "attention metadata");
    meta.positions = upload_ints_async(positions, "attention metadata");
    meta.token_cache_row = upload_ints_async(token_cache_row, "attention metadata");
    meta.token_cache_start = upload_ints_async(token_cache_start, "attention metadata");
    meta.token_kv_len = upload_ints_async(token_kv_len, "attention metadata");
    return meta;
  }
  static const int32_t* ints(const DeviceBuffer& b) {
    return static_cast<const int32_t*>(b.data());
  }
  static int64_t max_kv_len(const AttentionBatch& batch) {
    int64_t m = 1;
    for (int64_t s = 0; s < batch.num_sequences(); ++s) {
      m = std::max(m, batch.context_tokens[s] + batch.new_tokens[s]);
    }
    return m;
  }

  int device_ = 0;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<ExpertGemm> gemm_;
  std::shared_ptr<TransposedWeightCache> weight_cache_ = std::make_shared<TransposedWeightCache>();
  int rank_ = 0;
  int world_size_ = 1;
#if defined(MOESIM_ENGINE_CUDA_HAVE_NCCL)
  std::unique_ptr<NcclCommunicator> comm_;
#endif
};

void CudaBackend::mla_attention(const MlaWeights& w, const AttentionBatch& batch, MlaForm form,
                                const Tensor& x, const Tensor& latent_cache, const Tensor& out) {
  const MlaShape& s = w.shape;
  const int64_t tokens = batch.total_new_tokens();
  if (tokens == 0) return;
  const int heads = as_int(s.num_heads);
  const int lora = as_int(s.kv_lora_rank);
  const int nope = as_int(s.qk_nope_head_dim);
  const int rope = as_int(s.qk_rope_head_dim);
  const int vdim = as_int(s.v_head_dim);
  const int qk_dim = nope + rope;
  const int cache_width = lora + rope;
  MOESIM_CHECK(x.rows() == tokens && latent_cache.cols() == cache_width, "mla: shapes");
  const BatchMeta meta = upload_batch(batch);

  // Queries [T, heads * (nope + rope)].
  DeviceBuffer q = scratch(tokens * heads * qk_dim * 2, "mla q");
  if (s.q_lora_rank > 0) {
    const int q_lora = as_int(s.q_lora_rank);
    DeviceBuffer cq = scratch(tokens * q_lora * 2, "mla q latent");
    linear_into(as_bf16(x), w.w_q_a, cq.data(), tokens);
    launch_rmsnorm(static_cast<bf16*>(cq.data()), q_lora, as_bf16(w.q_a_norm),
                   static_cast<bf16*>(cq.data()), q_lora, tokens, q_lora, kInnerNormEps, stream_);
    linear_into(static_cast<bf16*>(cq.data()), w.w_q_b, q.data(), tokens);
  } else {
    linear_into(as_bf16(x), w.w_q_b, q.data(), tokens);
  }
  // New cache rows: normalised latent, rotated shared key.
  DeviceBuffer kv = scratch(tokens * cache_width * 2, "mla kv");
  auto* kv_ptr = static_cast<bf16*>(kv.data());
  linear_into(as_bf16(x), w.w_kv_a, kv_ptr, tokens);
  launch_rmsnorm(kv_ptr, cache_width, as_bf16(w.kv_a_norm), kv_ptr, cache_width, tokens, lora,
                 kInnerNormEps, stream_);
  launch_rope(kv_ptr, cache_width, tokens, 1, 0, lora, rope, ints(meta.positions), stream_);
  auto* q_ptr = static_cast<bf16*>(q.data());
  launch_rope(q_ptr, static_cast<int64_t>(heads) * qk_dim, tokens, heads, qk_dim, nope, rope,
              ints(meta.positions), stream_);
  launch_unpermute_rows(kv_ptr, ints(meta.token_cache_row), as_bf16(latent_cache), tokens,
                        cache_width, stream_);

  DeviceBuffer attn = scratch(tokens * heads * vdim * 2, "mla attention output");
  auto* attn_ptr = static_cast<bf16*>(attn.data());
  const float scale = 1.0f / std::sqrt(static_cast<float>(qk_dim));
  if (form == MlaForm::kAbsorbed) {
    const MlaDecodeShape shape{heads, lora, nope, rope, vdim, scale};
    const int64_t blocks_per_split = tokens * ((heads + kMlaHeadsPerBlock - 1) / kMlaHeadsPerBlock);
    const int splits =
        decode_num_splits(blocks_per_split, max_kv_len(batch), prop_.multiProcessorCount);
    DeviceBuffer ws =
        scratch(mla_decode_workspace_bytes(shape, as_int(tokens), splits), "mla decode workspace");
    launch_mla_decode(gemm_->handle(), shape, q_ptr, as_bf16(latent_cache),
                      ints(meta.token_cache_start), ints(meta.token_kv_len), as_bf16(w.w_kv_b),
                      as_int(tokens), splits, ws.data(), attn_ptr, stream_);
  } else {
    // Expand every cache row of the batch into per-head keys and values.
    const int64_t rows = batch.total_cache_rows();
    DeviceBuffer up = scratch(rows * heads * (nope + vdim) * 2, "mla kv up-projection");
    linear_into(as_bf16(latent_cache), w.w_kv_b, up.data(), rows, false, cache_width);
    DeviceBuffer k = scratch(rows * heads * qk_dim * 2, "mla keys");
    DeviceBuffer v = scratch(rows * heads * vdim * 2, "mla values");
    launch_mla_expand_kv(static_cast<bf16*>(up.data()), as_bf16(latent_cache),
                         static_cast<bf16*>(k.data()), static_cast<bf16*>(v.data()), rows, heads,
                         nope, rope, vdim, lora, stream_);
    const AttentionShape shape{heads, heads, qk_dim, vdim, scale};
    launch_attention_prefill(shape, q_ptr, static_cast<bf16*>(k.data()),
                             static_cast<bf16*>(v.data()), ints(meta.token_start),
                             ints(meta.num_new), ints(meta.num_ctx), ints(meta.cache_start),
                             as_int(batch.num_sequences()), meta.max_new, attn_ptr, stream_);
  }
  linear_into(attn_ptr, w.w_o, out.data, tokens);
}

void CudaBackend::gqa_attention(const GqaWeights& w, const AttentionBatch& batch, const Tensor& x,
                                const Tensor& k_cache, const Tensor& v_cache, const Tensor& out) {
  const GqaShape& s = w.shape;
  const int64_t tokens = batch.total_new_tokens();
  if (tokens == 0) return;
  const int heads = as_int(s.num_heads);
  const int kv_heads = as_int(s.num_kv_heads);
  const int d = as_int(s.head_dim);
  MOESIM_CHECK(kv_heads > 0 && heads % kv_heads == 0 && x.rows() == tokens, "gqa: shapes");
  const BatchMeta meta = upload_batch(batch);
  DeviceBuffer q = scratch(tokens * heads * d * 2, "gqa q");
  DeviceBuffer k = scratch(tokens * kv_heads * d * 2, "gqa k");
  DeviceBuffer v = scratch(tokens * kv_heads * d * 2, "gqa v");
  auto* q_ptr = static_cast<bf16*>(q.data());
  auto* k_ptr = static_cast<bf16*>(k.data());
  auto* v_ptr = static_cast<bf16*>(v.data());
  linear_into(as_bf16(x), w.w_q, q_ptr, tokens);
  linear_into(as_bf16(x), w.w_k, k_ptr, tokens);
  linear_into(as_bf16(x), w.w_v, v_ptr, tokens);
  if (s.qk_norm) {
    launch_rmsnorm(q_ptr, d, as_bf16(w.q_norm), q_ptr, d, tokens * heads, d, kInnerNormEps,
                   stream_);
    launch_rmsnorm(k_ptr, d, as_bf16(w.k_norm), k_ptr, d, tokens * kv_heads, d, kInnerNormEps,
                   stream_);
  }
  launch_rope(q_ptr, static_cast<int64_t>(heads) * d, tokens, heads, d, 0, d, ints(meta.positions),
              stream_);
  launch_rope(k_ptr, static_cast<int64_t>(kv_heads) * d, tokens, kv_heads, d, 0, d,
              ints(meta.positions), stream_);
  launch_unpermute_rows(k_ptr, ints(meta.token_cache_row), as_bf16(k_cache), tokens, kv_heads * d,
                        stream_);
  launch_unpermute_rows(v_ptr, ints(meta.token_cache_row), as_bf16(v_cache), tokens, kv_heads * d,
                        stream_);

  DeviceBuffer attn = scratch(tokens * heads * d * 2, "gqa attention output");
  auto* attn_ptr = static_cast<bf16*>(attn.data());
  const AttentionShape shape{heads, kv_heads, d, d, 1.0f / std::sqrt(static_cast<float>(d))};
  if (meta.max_new == 1) {
    const int64_t blocks_per_split = tokens * kv_heads * ((heads / kv_heads + 15) / 16);
    const int splits =
        decode_num_splits(blocks_per_split, max_kv_len(batch), prop_.multiProcessorCount);
    DeviceBuffer ws =
        scratch(gqa_decode_workspace_bytes(shape, as_int(tokens), splits), "gqa decode workspace");
    launch_gqa_decode(shape, q_ptr, as_bf16(k_cache), as_bf16(v_cache),
                      ints(meta.token_cache_start), ints(meta.token_kv_len), as_int(tokens), splits,
                      ws.data(), attn_ptr, stream_);
  } else {
    launch_attention_prefill(shape, q_ptr, as_bf16(k_cache), as_bf16(v_cache),
                             ints(meta.token_start), ints(meta.num_new), ints(meta.num_ctx),
                             ints(meta.cache_start), as_int(batch.num_sequences()), meta.max_new,
                             attn_ptr, stream_);
  }
  linear_into(attn_ptr, w.w_o, out.data, tokens);
}

void CudaBackend::kda_attention(const KdaWeights& w, const AttentionBatch& batch, const Tensor& x,
                                const KdaState& state, const Tensor& out) {
  const KdaShape& s = w.shape;
  const int64_t tokens = batch.total_new_tokens();
  if (tokens == 0) return;
  const int heads = as_int(s.num_heads);
  const int dk = as_int(s.head_dim_k);
  const int dv = as_int(s.head_dim_v);
  const int taps = as_int(s.short_conv_kernel);
  const int channels = heads * (2 * dk + dv);
  const int num_seqs = as_int(batch.num_sequences());
  MOESIM_CHECK(x.rows() == tokens, "kda: x shape");
  const BatchMeta meta = upload_batch(batch);

  // Projections, short convolutions + SiLU (q, k, v share one conv state row of `channels`).
  DeviceBuffer proj = scratch(tokens * heads * std::max(dk, dv) * 2, "kda projection");
  DeviceBuffer q = scratch(tokens * heads * dk * 2, "kda q");
  DeviceBuffer k = scratch(tokens * heads * dk * 2, "kda k");
  DeviceBuffer v = scratch(tokens * heads * dv * 2, "kda v");
  const struct {
    const Tensor* weight;
    const Tensor* conv;
    DeviceBuffer* dst;
    int width;
    int offset;
  } streams[] = {{&w.w_q, &w.conv_q, &q, heads * dk, 0},
                 {&w.w_k, &w.conv_k, &k, heads * dk, heads * dk},
                 {&w.w_v, &w.conv_v, &v, heads * dv, 2 * heads * dk}};
  for (const auto& st : streams) {
    linear_into(as_bf16(x), *st.weight, proj.data(), tokens);
    launch_kda_conv_silu(static_cast<bf16*>(proj.data()), as_bf16(*st.conv), as_f32(state.conv),
                         channels, st.offset, ints(meta.token_start), ints(meta.num_new), num_seqs,
                         taps, st.width, static_cast<bf16*>(st.dst->data()), stream_);
  }
  launch_l2norm_heads(static_cast<bf16*>(q.data()), tokens, heads, dk, kInnerNormEps,
                      1.0f / std::sqrt(static_cast<float>(dk)), stream_);
  launch_l2norm_heads(static_cast<bf16*>(k.data()), tokens, heads, dk, kInnerNormEps, 1.0f,
                      stream_);

  // Gates.
  const int rank = as_int(w.w_f_a.dim(1));
  DeviceBuffer low = scratch(tokens * rank * 2, "kda gate low-rank");
  DeviceBuffer f = scratch(tokens * heads * dk * 2, "kda forget gate");
  DeviceBuffer beta_logit = scratch(tokens * heads * 2, "kda beta");
  linear_into(as_bf16(x), w.w_f_a, low.data(), tokens);
  linear_into(static_cast<bf16*>(low.data()), w.w_f_b, f.data(), tokens);
  linear_into(as_bf16(x), w.w_beta, beta_logit.data(), tokens);
  DeviceBuffer log_alpha = scratch(tokens * heads * dk * 4, "kda log alpha");
  DeviceBuffer beta = scratch(tokens * heads * 4, "kda beta");
  launch_kda_gates(static_cast<bf16*>(f.data()), as_f32(w.a_log), as_f32(w.dt_bias),
                   static_cast<bf16*>(beta_logit.data()), tokens, heads, dk,
                   static_cast<float*>(log_alpha.data()), static_cast<float*>(beta.data()),
                   stream_);

  // Recurrence: chunked (WY) form, or the one-token recurrent kernel when every sequence decodes.
  DeviceBuffer o = scratch(tokens * heads * dv * 2, "kda output");
  auto* o_ptr = static_cast<bf16*>(o.data());
  const KdaKernelShape shape{num_seqs, heads, dk, dv};
  if (meta.max_new == 1) {
    launch_kda_decode(shape, static_cast<bf16*>(q.data()), static_cast<bf16*>(k.data()),
                      static_cast<bf16*>(v.data()), static_cast<float*>(log_alpha.data()),
                      static_cast<float*>(beta.data()), as_f32(state.recurrent), o_ptr, stream_);
  } else {
    launch_kda_chunked(shape, static_cast<bf16*>(q.data()), static_cast<bf16*>(k.data()),
                       static_cast<bf16*>(v.data()), static_cast<float*>(log_alpha.data()),
                       static_cast<float*>(beta.data()), ints(meta.token_start), ints(meta.num_new),
                       as_f32(state.recurrent), o_ptr, stream_);
  }

  // Output norm per head, gate, projection.
  launch_rmsnorm(o_ptr, dv, as_bf16(w.o_norm), o_ptr, dv, tokens * heads, dv, kInnerNormEps,
                 stream_);
  if (s.output_gate) {
    const int g_rank = as_int(w.w_g_a.dim(1));
    DeviceBuffer g_low = scratch(tokens * g_rank * 2, "kda output gate low-rank");
    DeviceBuffer g = scratch(tokens * heads * dv * 2, "kda output gate");
    linear_into(as_bf16(x), w.w_g_a, g_low.data(), tokens);
    linear_into(static_cast<bf16*>(g_low.data()), w.w_g_b, g.data(), tokens);
    launch_sigmoid_gate(o_ptr, static_cast<bf16*>(g.data()), tokens * heads * dv, stream_);
  }
  linear_into(o_ptr, w.w_o, out.data, tokens);
}

void CudaBackend::expert_ffn(const Tensor& x, const std::vector<int64_t>& tokens_per_expert,
                             const FfnWeights& w, const Tensor& out) {
  const int64_t rows = x.rows();
  const int hidden = as_int(w.hidden_size);
  const int inter = as_int(w.intermediate_size);
  MOESIM_CHECK(static_cast<int64_t>(tokens_per_expert.size()) == w.num_experts,
               "expert_ffn: one count per expert");
  if (rows == 0) return;
  DeviceBuffer h = scratch(rows * 2 * inter * 2, "expert gate_up output");
  DeviceBuffer act = scratch(rows * inter * 2, "expert activation");
  auto* h_ptr = static_cast<bf16*>(h.data());
  auto* act_ptr = static_cast<bf16*>(act.data());
  if (w.gate_up.dtype == DType::kBF16) {
    gemm_->grouped_linear_bf16(as_bf16(x), as_bf16(w.gate_up), h_ptr, tokens_per_expert, hidden,
                               2 * inter, stream_);
    launch_swiglu(h_ptr, act_ptr, rows, inter, stream_);
    gemm_->grouped_linear_bf16(act_ptr, as_bf16(w.down), as_bf16(out), tokens_per_expert, inter,
                               hidden, stream_);
    return;
  }
  MOESIM_CHECK(
      w.gate_up.dtype == DType::kFP8E4M3 && !w.gate_up_scale.empty() && !w.down_scale.empty(),
      "expert_ffn: weights must be BF16, or FP8 with scales");
  if (!supports_expert_dtype(DType::kFP8E4M3)) {
    throw BackendUnavailableError("cuda: FP8 experts need compute capability 8.9 or newer; " +
                                  std::string(prop_.name) + " is " + std::to_string(prop_.major) +
                                  "." + std::to_string(prop_.minor));
  }
  auto transposed = [&](const Tensor& weights, int64_t e, int in, int out_f) {
    const auto* src = static_cast<const uint8_t*>(weights.data) + e * in * out_f;
    auto it = weight_cache_->entries.find(src);
    if (it == weight_cache_->entries.end()) {
      const int64_t bytes = static_cast<int64_t>(in) * out_f;
      DeviceBuffer t(device_malloc(bytes, "transposed FP8 expert weight"), bytes,
                     [](void* p) { cudaFree(p); });
      launch_transpose_bytes(src, in, out_f, static_cast<uint8_t*>(t.data()), stream_);
      it = weight_cache_->entries.emplace(src, std::move(t)).first;
    }
    return static_cast<const fp8e4m3*>(it->second.data());
  };
  const int max_width = std::max(hidden, inter);
  DeviceBuffer xq = scratch(rows * max_width, "fp8 activations");
  DeviceBuffer row_scale = scratch(rows * 4, "fp8 row scales");
  DeviceBuffer y32 = scratch(rows * std::max(2 * inter, hidden) * 4, "fp8 gemm output");
  auto* xq_ptr = static_cast<fp8e4m3*>(xq.data());
  auto* scale_ptr = static_cast<float*>(row_scale.data());
  auto* y_ptr = static_cast<float*>(y32.data());
  launch_quantize_fp8_rows(as_bf16(x), rows, hidden, xq_ptr, scale_ptr, stream_);
  int64_t row0 = 0;
  for (int64_t e = 0; e < w.num_experts; ++e) {
    const int64_t n = tokens_per_expert[e];
    if (n > 0) {
      gemm_->fp8_linear(xq_ptr + row0 * hidden, transposed(w.gate_up, e, hidden, 2 * inter),
                        y_ptr + row0 * 2 * inter, n, hidden, 2 * inter, stream_);
      launch_dequantize_rows(y_ptr + row0 * 2 * inter, scale_ptr + row0,
                             as_f32(w.gate_up_scale) + e, n, 2 * inter, h_ptr + row0 * 2 * inter,
                             stream_);
    }
    row0 += n;
  }
  launch_swiglu(h_ptr, act_ptr, rows, inter, stream_);
  launch_quantize_fp8_rows(act_ptr, rows, inter, xq_ptr, scale_ptr, stream_);
  row0 = 0;
  for (int64_t e = 0; e < w.num_experts; ++e) {
    const int64_t n = tokens_per_expert[e];
    if (n > 0) {
      gemm_->fp8_linear(xq_ptr + row0 * inter, transposed(w.down, e, inter, hidden),
                        y_ptr + row0 * hidden, n, inter, hidden, stream_);
      launch_dequantize_rows(y_ptr + row0 * hidden, scale_ptr + row0, as_f32(w.down_scale) + e, n,
                             hidden, as_bf16(out) + row0 * hidden, stream_);
    }
    row0 += n;
  }
}

}  // namespace

bool cuda_device_available() {
  int count = 0;  // left unwritten when the call fails (no driver)
  const cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess) {
    cudaGetLastError();  // clear the error so later calls do not see it
    return false;
  }
  return count > 0;
}

std::unique_ptr<Backend> make_cuda_backend() {
  int count = 0;
  const cudaError_t result = cudaGetDeviceCount(&count);
  if (result == cudaErrorNoDevice || result == cudaErrorInsufficientDriver || count == 0) {
    cudaGetLastError();
    throw BackendUnavailableError(std::string("backend 'cuda': no usable CUDA device (") +
                                  cudaGetErrorName(result) + ")");
  }
  MOESIM_CUDA_CHECK(result);
  return std::make_unique<CudaBackend>(0);
}

}  // namespace moesim::engine::cuda
