// The CPU backend: host allocations counted against a memory limit, operations forwarded to the
// references in engine/cpu/reference.h. Timing: the calling thread's CPU time when Eigen runs
// single-threaded, steady_clock otherwise (see make_cpu_timer in cpu_backend.h).
#include "engine/cpu/cpu_backend.h"

#include <malloc.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <numeric>
#include <string>

#include "base/check.h"
#include "engine/cpu/host_matrix.h"
#include "engine/cpu/reference.h"
#include "engine/synthetic.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace moesim::engine::cpu {

int64_t host_available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t value_kib = 0;
  std::string unit;
  while (meminfo >> key >> value_kib >> unit) {
    if (key == "MemAvailable:") return value_kib * 1024;
  }
  return 0;
}

namespace {

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

class SteadyClockTimer : public Timer {
 public:
  void start() override { start_ = std::chrono::steady_clock::now(); }
  void stop() override { stop_ = std::chrono::steady_clock::now(); }
  int64_t elapsed_ns() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(stop_ - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point stop_;
};

// CPU time of the calling thread: an operation's own compute, without the time the thread spent
// preempted by other processes.
class ThreadCpuTimer : public Timer {
 public:
  void start() override { start_ns_ = now_ns(); }
  void stop() override { stop_ns_ = now_ns(); }
  int64_t elapsed_ns() override { return stop_ns_ - start_ns_; }

 private:
  static int64_t now_ns() {
    timespec ts{};
    MOESIM_CHECK(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0,
                 "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
  int64_t start_ns_ = 0;
  int64_t stop_ns_ = 0;
};

}  // namespace

CpuClock cpu_timer_clock() {
  return Eigen::nbThreads() == 1 ? CpuClock::kThreadCpu : CpuClock::kWall;
}

std::unique_ptr<Timer> make_cpu_timer() {
  if (cpu_timer_clock() == CpuClock::kThreadCpu) return std::make_unique<ThreadCpuTimer>();
  return std::make_unique<SteadyClockTimer>();
}

namespace {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options)
      : limit_bytes_(options.memory_limit_bytes.value_or(host_available_memory_bytes() / 10 * 8)),
        allocated_bytes_(std::make_shared<int64_t>(0)),
        device_name_(cpu_model_name()) {}

  std::string name() const override { return "cpu"; }
  std::string device_name() const override { return device_name_; }
  DevicePeaks peaks() const override { return DevicePeaks{}; }
  MemoryInfo memory_info() const override {
    return MemoryInfo{limit_bytes_, limit_bytes_ - *allocated_bytes_};
  }
  bool supports_expert_dtype(DType weight_dtype) const override {
    return weight_dtype == DType::kBF16 || weight_dtype == DType::kFP8E4M3;
  }

  DeviceTensor allocate(DType dtype, const Shape& shape, std::string_view what_for) override {
    const int64_t bytes = shape_size_bytes(shape, dtype_size_bytes(dtype));
    const int64_t available = limit_bytes_ - *allocated_bytes_;
    if (bytes > available) throw OutOfMemoryError(std::string(what_for), bytes, available);
    // 64-byte alignment; at least one byte so empty tensors still have a distinct address.
    const size_t padded = (static_cast<size_t>(bytes) + 63) / 64 * 64 + 64;
    void* data = std::aligned_alloc(64, padded);
    if (data == nullptr) throw OutOfMemoryError(std::string(what_for), bytes, available);
    *allocated_bytes_ += bytes;
    std::shared_ptr<int64_t> counter = allocated_bytes_;
    DeviceTensor t;
    t.buffer = DeviceBuffer(data, bytes, [counter, bytes](void* p) {
      std::free(p);
      *counter -= bytes;
    });
    t.view = Tensor{data, dtype, shape};
    return t;
  }
  void upload(const void* host_src, const Tensor& dst) override {
    std::memcpy(dst.data, host_src, dst.size_bytes());
  }
  void download(const Tensor& src, void* host_dst) override {
    std::memcpy(host_dst, src.data, src.size_bytes());
  }
  void fill_synthetic(const Tensor& dst, uint64_t seed, float scale) override {
    MOESIM_CHECK(dst.dtype != DType::kI32, "fill_synthetic: float tensors only");
    const int64_t n = dst.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      store_element(dst, i, synthetic_value(seed, static_cast<uint64_t>(i)) * scale);
    }
  }

  void rmsnorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    cpu::rmsnorm(x, weight, eps, out);
  }
  void mla_attention(const MlaWeights& w, const AttentionBatch& batch, MlaForm form,
                     const Tensor& x, const Tensor& latent_cache, const Tensor& out) override {
    cpu::mla_attention(w, batch, form, x, latent_cache, out);
  }
  void gqa_attention(const GqaWeights& w, const AttentionBatch& batch, const Tensor& x,
                     const Tensor& k_cache, const Tensor& v_cache, const Tensor& out) override {
    cpu::gqa_attention(w, batch, x, k_cache, v_cache, out);
  }
  void kda_attention(const KdaWeights& w, const AttentionBatch& batch, const Tensor& x,
                     const KdaState& state, const Tensor& out) override {
    cpu::kda_attention(w, batch, x, state, out);
  }
  void router(const Tensor& x, const RouterWeights& w, const RouterConfig& config,
              const Tensor& expert_ids, const Tensor& expert_weights) override {
    cpu::router(x, w, config, expert_ids, expert_weights);
  }
  void permute(const Tensor& x, const Tensor& gather_rows, const Tensor& out) override {
    cpu::permute(x, gather_rows, out);
  }
  void unpermute(const Tensor& x, const Tensor& scatter_rows, const Tensor& out) override {
    cpu::unpermute(x, scatter_rows, out);
  }
  void expert_ffn(const Tensor& x, const std::vector<int64_t>& tokens_per_expert,
                  const FfnWeights& w, const Tensor& out) override {
    cpu::expert_ffn(x, tokens_per_expert, w, out);
  }
  void weighted_combine(const Tensor& expert_out, const Tensor& weights, const Tensor& shared_out,
                        const Tensor& out) override {
    cpu::weighted_combine(expert_out, weights, shared_out, out);
  }

  void init_distributed(const DistributedConfig& config) override {
    if (config.communicator != nullptr) {
      MOESIM_CHECK(config.communicator->rank() == config.rank &&
                       config.communicator->world_size() == config.world_size,
                   "DistributedConfig: communicator disagrees with rank / world_size");
      communicator_ = config.communicator;
      return;
    }
    if (config.world_size != 1) {
      throw BackendUnavailableError(
          "the cpu backend runs several ranks only as threads of one process (moesim-engine "
          "replay --backend cpu --nranks N), got world_size " +
          std::to_string(config.world_size) + " without an in-process communicator");
    }
    communicator_.reset();
  }
  int world_size() const override { return communicator_ ? communicator_->world_size() : 1; }
  int rank() const override { return communicator_ ? communicator_->rank() : 0; }
  bool all_to_all(const Tensor& send, const std::vector<int64_t>& send_rows_per_rank,
                  const Tensor& recv, const std::vector<int64_t>& recv_rows_per_rank) override {
    if (communicator_ == nullptr || communicator_->world_size() < 2) return false;
    MOESIM_CHECK(send.dtype == recv.dtype && send.cols() == recv.cols(),
                 "all_to_all: send and recv rows differ");
    const int64_t row_bytes = dtype_size_bytes(send.dtype) * send.cols();
    std::vector<int64_t> send_bytes, recv_bytes;
    for (int64_t rows : send_rows_per_rank) send_bytes.push_back(rows * row_bytes);
    for (int64_t rows : recv_rows_per_rank) recv_bytes.push_back(rows * row_bytes);
    MOESIM_CHECK(
        std::accumulate(send_bytes.begin(), send_bytes.end(), int64_t{0}) <= send.size_bytes() &&
            std::accumulate(recv_bytes.begin(), recv_bytes.end(), int64_t{0}) <= recv.size_bytes(),
        "all_to_all: row counts exceed the buffers");
    communicator_->all_to_all_bytes(send.data, send_bytes, recv.data, recv_bytes);
    return true;
  }

  void synchronize() override {}
  std::unique_ptr<Timer> make_timer() override { return make_cpu_timer(); }
  std::unique_ptr<Timer> make_collective_timer() override {
    return std::make_unique<SteadyClockTimer>();
  }
  // Eigen's OpenMP team as this thread runs it (libgomp keeps one pool per calling thread).
  std::vector<int> worker_thread_ids() override {
    std::vector<int> tids;
#ifdef _OPENMP
    const int n = Eigen::nbThreads();
    if (n <= 1) return tids;
    std::vector<int> team(n, 0);
#pragma omp parallel num_threads(n)
    team[omp_get_thread_num()] = static_cast<int>(::syscall(SYS_gettid));
    for (int i = 1; i < n; ++i) {
      if (team[i] != 0) tids.push_back(team[i]);
    }
#endif
    return tids;
  }

 private:
  int64_t limit_bytes_;
  std::shared_ptr<int64_t> allocated_bytes_;
  std::string device_name_;
  std::shared_ptr<Communicator> communicator_;  // null: a single rank
};

}  // namespace

void keep_freed_heap_memory() {
  static const bool done = [] {
    // No allocation is served by a mapping of its own — except on a thread other than the main
    // one (--nranks), where glibc still maps one larger than a thread arena (64 MiB) — and the
    // main heap's top is never returned to the kernel.
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
    return true;
  }();
  (void)done;
}

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  keep_freed_heap_memory();
  return std::make_unique<CpuBackend>(options);
}

}  // namespace moesim::engine::cpu
