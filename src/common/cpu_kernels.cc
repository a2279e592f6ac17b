#include "tandem/common/cpu_kernels.h"

#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "loaded_symbol.h"
#include "tandem/common/check.h"

namespace tandem {

namespace {
constexpr const char* kBlasCore = "Haswell";

// OpenBLAS's chosen kernels, through the symbols LibTorch loaded; empty without OpenBLAS.
std::string openblas_core() {
  const auto fn = detail::loaded_symbol<char* (*)()>("openblas_get_corename");
  const char* name = fn ? fn() : nullptr;
  return name ? std::string(name) : std::string();
}

// This process's arguments as it was started, from /proc/self/cmdline (NUL after each).
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    out.push_back(all.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}
}  // namespace

CpuKernels use_portable_cpu_kernels() {
  CpuKernels out;
  out.blas_core = openblas_core();
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    out.why_not =
        "this processor has no AVX2 and FMA, so its CPU kernels round otherwise than an AVX2 "
        "machine's";
    return out;
  }
#else
  out.why_not = "portable CPU kernels are the x86-64 AVX2 family; this is another architecture";
  return out;
#endif
  setenv("ATEN_CPU_CAPABILITY", "avx2", /*overwrite=*/1);
  setenv("MKL_CBWR", "AVX2", /*overwrite=*/1);
  // oneDNN, which LibTorch's convolutions call, picks its kernels from the processor: a 3D
  // convolution trained to other bits under its AVX-512, AVX2 and SSE4.1 kernels. Capped at
  // AVX2 like the others (read at its first primitive). ATen's own convolution would not depend
  // on it but was 15 times slower on a U-Net.
  setenv("ONEDNN_MAX_CPU_ISA", "AVX2", /*overwrite=*/1);
  setenv("DNNL_MAX_CPU_ISA", "AVX2", /*overwrite=*/1);
  if (!out.blas_core.empty() && strcasecmp(out.blas_core.c_str(), kBlasCore) != 0) {
    // OpenBLAS chose its kernels when it loaded: only a new start chooses again.
    const char* before = std::getenv("OPENBLAS_CORETYPE");
    if (before && strcasecmp(before, kBlasCore) == 0) {
      out.why_not = fmt::format("OpenBLAS runs {} kernels although OPENBLAS_CORETYPE={}",
                                out.blas_core, before);
      return out;
    }
    setenv("OPENBLAS_CORETYPE", kBlasCore, /*overwrite=*/1);
    std::vector<std::string> args = own_arguments();
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (args.empty()) {
      out.why_not = "could not read /proc/self/cmdline to start again with Haswell kernels";
    } else {
      std::fflush(nullptr);  // what was written so far, before this image goes
      execv("/proc/self/exe", argv.data());
      out.why_not = fmt::format("could not start again with OPENBLAS_CORETYPE={} ({})", kBlasCore,
                                std::strerror(errno));
    }
    return out;
  }
  out.portable = true;
  return out;
}

}  // namespace tandem
