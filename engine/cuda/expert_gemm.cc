#include "engine/cuda/expert_gemm.h"

#include <string>

#include "engine/cuda/check.h"

namespace moesim::engine::cuda {
namespace {

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

// RAII for the cuBLASLt descriptors of one FP8 call.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtDescriptors() {
    if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

void linear(cublasHandle_t handle, const bf16* x, const bf16* w, void* y, bool y_fp32, int64_t rows,
            int in_features, int out_features, cudaStream_t stream, int64_t x_row_stride) {
  if (rows == 0) return;
  const int64_t ldb = x_row_stride == 0 ? in_features : x_row_stride;
  MOESIM_CUDA_REQUIRE(ldb >= in_features && ldb <= 0x7fffffff, "bad x row stride");
  MOESIM_CUDA_REQUIRE(rows <= 0x7fffffff, "too many rows for one cuBLAS call");
  MOESIM_CUBLAS_CHECK(cublasSetStream(handle, stream));
  const float alpha = 1.0f;
  const float beta = 0.0f;
  // Column-major: y^T [out, rows] = W^T [out, in] (W [in, out] row-major) x^T [in, rows].
  MOESIM_CUBLAS_CHECK(cublasGemmEx(
      handle, CUBLAS_OP_N, CUBLAS_OP_N, out_features, static_cast<int>(rows), in_features, &alpha,
      w, CUDA_R_16BF, out_features, x, CUDA_R_16BF, static_cast<int>(ldb), &beta, y,
      y_fp32 ? CUDA_R_32F : CUDA_R_16BF, out_features, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

ExpertGemm::ExpertGemm() {
  MOESIM_CUBLAS_CHECK(cublasCreate(&handle_));
  MOESIM_CUBLAS_CHECK(cublasLtCreate(&lt_handle_));
  MOESIM_CUDA_CHECK(cudaMalloc(&lt_workspace_, kLtWorkspaceBytes));
  lt_workspace_bytes_ = kLtWorkspaceBytes;
}

ExpertGemm::~ExpertGemm() {
  // Destructors cannot report errors; release what exists and ignore failures.
  if (device_pointers_ != nullptr) cudaFree(device_pointers_);
  if (lt_workspace_ != nullptr) cudaFree(lt_workspace_);
  if (lt_handle_ != nullptr) cublasLtDestroy(lt_handle_);
  if (handle_ != nullptr) cublasDestroy(handle_);
}

void ExpertGemm::ensure_pointer_capacity(size_t num_pointers) {
  if (num_pointers <= pointer_capacity_) return;
  if (device_pointers_ != nullptr) {
    MOESIM_CUDA_CHECK(cudaDeviceSynchronize());  // a queued grouped call may still read them
    MOESIM_CUDA_CHECK(cudaFree(device_pointers_));
    device_pointers_ = nullptr;
  }
  MOESIM_CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void**>(&device_pointers_), 3 * num_pointers * sizeof(void*)));
  pointer_capacity_ = num_pointers;
}

void ExpertGemm::grouped_linear_bf16(const bf16* x, const bf16* w, bf16* y,
                                     const std::vector<int64_t>& rows_per_expert, int in_features,
                                     int out_features, cudaStream_t stream) {
  std::vector<cublasOperation_t> trans;
  std::vector<int> m, n, k, lda, ldb, ldc, group_size;
  std::vector<float> alpha, beta;
  std::vector<const void*> a_ptrs, b_ptrs;
  std::vector<void*> c_ptrs;
  int64_t row0 = 0;
  const int64_t weight_elems = static_cast<int64_t>(in_features) * out_features;
  for (size_t e = 0; e < rows_per_expert.size(); ++e) {
    const int64_t rows = rows_per_expert[e];
    if (rows > 0) {
      MOESIM_CUDA_REQUIRE(rows <= 0x7fffffff, "too many rows for one expert");
      trans.push_back(CUBLAS_OP_N);
      m.push_back(out_features);
      n.push_back(static_cast<int>(rows));
      k.push_back(in_features);
      lda.push_back(out_features);
      ldb.push_back(in_features);
      ldc.push_back(out_features);
      group_size.push_back(1);
      alpha.push_back(1.0f);
      beta.push_back(0.0f);
      a_ptrs.push_back(w + static_cast<int64_t>(e) * weight_elems);
      b_ptrs.push_back(x + row0 * in_features);
      c_ptrs.push_back(y + row0 * out_features);
    }
    row0 += rows;
  }
  const int num_groups = static_cast<int>(m.size());
  if (num_groups == 0) return;
  MOESIM_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  ensure_pointer_capacity(static_cast<size_t>(num_groups));
  void** d_a = device_pointers_;
  void** d_b = device_pointers_ + pointer_capacity_;
  void** d_c = device_pointers_ + 2 * pointer_capacity_;
  // Pageable sources: cudaMemcpyAsync returns once the bytes are staged, so the vectors may die.
  MOESIM_CUDA_CHECK(cudaMemcpyAsync(d_a, a_ptrs.data(), num_groups * sizeof(void*),
                                    cudaMemcpyHostToDevice, stream));
  MOESIM_CUDA_CHECK(cudaMemcpyAsync(d_b, b_ptrs.data(), num_groups * sizeof(void*),
                                    cudaMemcpyHostToDevice, stream));
  MOESIM_CUDA_CHECK(cudaMemcpyAsync(d_c, c_ptrs.data(), num_groups * sizeof(void*),
                                    cudaMemcpyHostToDevice, stream));
  const cublasStatus_t status = cublasGemmGroupedBatchedEx(
      handle_, trans.data(), trans.data(), m.data(), n.data(), k.data(), alpha.data(),
      const_cast<const void**>(reinterpret_cast<void**>(d_a)), CUDA_R_16BF, lda.data(),
      const_cast<const void**>(reinterpret_cast<void**>(d_b)), CUDA_R_16BF, ldb.data(), beta.data(),
      d_c, CUDA_R_16BF, ldc.data(), num_groups, group_size.data(), CUBLAS_COMPUTE_32F);
  // A configuration the grouped API rejects (not supported, or an argument it refuses that the
  // plain GEMM accepts) runs group by group; a real argument error then fails in the loop.
  used_grouped_api_ =
      status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_INVALID_VALUE;
  if (used_grouped_api_) {
    MOESIM_CUBLAS_CHECK(status);
    return;
  }
  for (int g = 0; g < num_groups; ++g) {
    MOESIM_CUBLAS_CHECK(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m[g], n[g], k[g], &alpha[g],
                                     a_ptrs[g], CUDA_R_16BF, lda[g], b_ptrs[g], CUDA_R_16BF, ldb[g],
                                     &beta[g], c_ptrs[g], CUDA_R_16BF, ldc[g], CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
  }
}

void ExpertGemm::fp8_linear(const fp8e4m3* x, const fp8e4m3* w_t, float* y, int64_t rows,
                            int in_features, int out_features, cudaStream_t stream) {
  if (rows == 0) return;
  MOESIM_CUDA_REQUIRE(in_features % 16 == 0 && out_features % 16 == 0,
                      "FP8 GEMM needs in/out features that are multiples of 16");
  LtDescriptors desc;
  MOESIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T;
  const cublasOperation_t trans_b = CUBLAS_OP_N;
  MOESIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                                     sizeof(trans_a)));
  MOESIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                                     sizeof(trans_b)));
  // Column-major: D [out, rows] = A^T B with A = w_t viewed as in x out (ld in) and
  // B = x viewed as in x rows (ld in).
  MOESIM_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&desc.a, CUDA_R_8F_E4M3, in_features, out_features, in_features));
  MOESIM_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&desc.b, CUDA_R_8F_E4M3, in_features, rows, in_features));
  MOESIM_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&desc.d, CUDA_R_32F, out_features, rows, out_features));
  MOESIM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&desc.preference));
  MOESIM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      desc.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt_workspace_bytes_,
      sizeof(lt_workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int num_results = 0;
  MOESIM_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt_handle_, desc.op, desc.a, desc.b, desc.d,
                                                     desc.d, desc.preference, 1, &heuristic,
                                                     &num_results));
  MOESIM_CUDA_REQUIRE(num_results > 0,
                      "cuBLASLt has no FP8 algorithm for in=" + std::to_string(in_features) +
                          " out=" + std::to_string(out_features) + " rows=" + std::to_string(rows) +
                          " on this device");
  const float alpha = 1.0f;
  const float beta = 0.0f;
  MOESIM_CUBLAS_CHECK(cublasLtMatmul(lt_handle_, desc.op, &alpha, w_t, desc.a, x, desc.b, &beta, y,
                                     desc.d, y, desc.d, &heuristic.algo, lt_workspace_,
                                     lt_workspace_bytes_, stream));
}

}  // namespace moesim::engine::cuda
