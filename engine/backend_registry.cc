// make_backend(): "cpu" always; "cuda" when engine/cuda was compiled. The CUDA backend is a
// separate library (moesim_engine_cuda) that depends on moesim_engine_core; this file lives in
// moesim_engine, which links both and sees MOESIM_ENGINE_HAVE_CUDA only when the CUDA library
// exists. Nothing here is a global: each call creates a fresh backend.
#include <algorithm>
#include <stdexcept>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#if defined(MOESIM_ENGINE_HAVE_CUDA)
#include "engine/cuda/cuda_backend.h"
#endif

namespace moesim::engine {

std::vector<std::string> backend_names() {
  std::vector<std::string> names = {"cpu"};
#if defined(MOESIM_ENGINE_HAVE_CUDA)
  names.push_back("cuda");
#endif
  std::sort(names.begin(), names.end());
  return names;
}

std::unique_ptr<Backend> make_backend(std::string_view name) {
  return make_backend(name, BackendOptions{});
}

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendOptions& options) {
  if (name == "cpu") {
    cpu::CpuBackendOptions cpu_options;
    cpu_options.memory_limit_bytes = options.memory_limit_bytes;
    return cpu::make_cpu_backend(cpu_options);
  }
#if defined(MOESIM_ENGINE_HAVE_CUDA)
  if (name == "cuda") return cuda::make_cuda_backend();
#else
  if (name == "cuda") {
    throw BackendUnavailableError(
        "backend 'cuda' is not compiled into this build (configure with nvcc available)");
  }
#endif
  std::string valid;
  for (const std::string& n : backend_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown backend '" + std::string(name) + "' (valid: " + valid + ")");
}

}  // namespace moesim::engine
