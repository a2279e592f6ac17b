#include "tandem/common/cpu_kernels.h"

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <dlfcn.h>
#include <fmt/ranges.h>
#include <strings.h>
#include <sys/stat.h>
#include <torch/version.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "loaded_symbol.h"
#include "tandem/common/build_info.h"
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

// The file, links resolved, of the loaded library that defines a symbol; empty when none does.
std::string file_of(const char* symbol) {
  void* address = dlsym(RTLD_DEFAULT, symbol);
  Dl_info info{};
  if (!address || !dladdr(address, &info) || !info.dli_fname) return "";
  char* real = realpath(info.dli_fname, nullptr);
  const std::string out = real ? real : info.dli_fname;
  std::free(real);
  return out;
}

// Whether a loaded library is OpenBLAS or a wrapper that calls it (Debian's OpenBLAS
// libblas.so.3 forwards to libopenblas.so.0): asked of that library and what it loaded.
bool is_openblas(const std::string& file) {
  void* handle = dlopen(file.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return false;
  const bool yes = dlsym(handle, "openblas_get_corename") != nullptr;
  dlclose(handle);
  return yes;
}

bool is_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
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
// Starts this program again in this process with the environment as now set: returns only
// when that fails, with the reason.
std::string start_again(const char* what) {
  std::vector<std::string> args = own_arguments();
  if (args.empty()) return fmt::format("could not read /proc/self/cmdline to start again {}", what);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);  // what was written so far, before this image goes
  // The program's own path, not /proc/self/exe: the process keeps its name ("tandem", not
  // "exe") for ps, top, pkill and mpirun's reports.
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    execv(self, argv.data());
  }
  execv("/proc/self/exe", argv.data());
  return fmt::format("could not start again {} ({})", what, std::strerror(errno));
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
  // LibTorch calls the first sgemm_ loaded. Another BLAS than OpenBLAS there (on Debian, another
  // library chosen for libblas.so.3: BLIS, ATLAS, the reference BLAS) rounds otherwise, even
  // when an OpenBLAS is loaded too. OpenBLAS, where installed beside it, is put first on the
  // library path for a new start. No separate BLAS means LibTorch's own (MKL, held by MKL_CBWR).
  const std::string file = file_of("sgemm_");
  if (!file.empty() && file.find("libtorch") == std::string::npos && !is_openblas(file)) {
    // Debian's OpenBLAS beside that file, or beside the folder it is in (.../blis-pthread/).
    std::string dir = file.substr(0, file.rfind('/'));
    const std::string up = dir.substr(0, dir.rfind('/'));
    dir = is_file(dir + "/openblas-pthread/libblas.so.3") ? dir + "/openblas-pthread"
                                                          : up + "/openblas-pthread";
    const char* path = std::getenv("LD_LIBRARY_PATH");
    const std::string old_path = path ? path : "";
    if (!is_file(dir + "/libblas.so.3")) {
      out.why_not = fmt::format(
          "LibTorch's BLAS is {}, not OpenBLAS, and no OpenBLAS is installed at {} (Debian: "
          "apt-get install libopenblas0-pthread)",
          file, dir);
      return out;
    }
    if (old_path.rfind(dir, 0) == 0) {
      out.why_not =
          fmt::format("LibTorch's BLAS is {} although LD_LIBRARY_PATH starts with {}", file, dir);
      return out;
    }
    setenv("LD_LIBRARY_PATH", (old_path.empty() ? dir : dir + ":" + old_path).c_str(), 1);
    setenv("OPENBLAS_CORETYPE", kBlasCore, /*overwrite=*/1);
    out.why_not = start_again(fmt::format("with OpenBLAS from {}", dir).c_str());
    return out;
  }
  if (!out.blas_core.empty() && strcasecmp(out.blas_core.c_str(), kBlasCore) != 0) {
    // OpenBLAS chose its kernels when it loaded: only a new start chooses again.
    const char* before = std::getenv("OPENBLAS_CORETYPE");
    if (before && strcasecmp(before, kBlasCore) == 0) {
      out.why_not = fmt::format("OpenBLAS runs {} kernels although OPENBLAS_CORETYPE={}",
                                out.blas_core, before);
      return out;
    }
    setenv("OPENBLAS_CORETYPE", kBlasCore, /*overwrite=*/1);
    out.why_not = start_again(fmt::format("with OPENBLAS_CORETYPE={}", kBlasCore).c_str());
    return out;
  }
  out.portable = true;
  return out;
}

namespace {
// The processor's name, as /proc/cpuinfo gives it; empty where it gives none.
std::string processor_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t value = line.find_first_not_of(" \t", line.find(':') + 1);
    if (line.find(':') != std::string::npos && value != std::string::npos)
      return line.substr(value);
  }
  return "";
}

// ATen's kernel family, from its configuration text (the function that answers it directly is
// not exported by every LibTorch).
std::string aten_kernels() {
  const std::string config = at::show_config();
  const std::string key = "CPU capability usage: ";
  const size_t found = config.find(key);
  if (found == std::string::npos) return "not reported";
  const size_t begin = found + key.size();
  return config.substr(begin, config.find('\n', begin) - begin);
}

std::string environment(const char* name) {
  const char* v = std::getenv(name);
  return v ? fmt::format("{}={}", name, v) : fmt::format("{} not set", name);
}
}  // namespace

std::vector<std::pair<std::string, std::string>> cpu_numerics() {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("tandem", describe_build());  // the code itself comes first
  std::string name = processor_name();
#if defined(__x86_64__)
  __builtin_cpu_init();
  std::vector<std::string> has;  // the builtin takes literals only
  if (__builtin_cpu_supports("avx2")) has.emplace_back("avx2");
  if (__builtin_cpu_supports("fma")) has.emplace_back("fma");
  if (__builtin_cpu_supports("avx512f")) has.emplace_back("avx512f");
  name += has.empty() ? " (no avx2, fma or avx512f)" : fmt::format(" ({})", fmt::join(has, " "));
#endif
  out.emplace_back("processor", name);
  out.emplace_back("libtorch", TORCH_VERSION);
  const std::string blas = file_of("sgemm_");
  out.emplace_back("blas_library", blas.empty() ? "no sgemm_ loaded" : blas);
  const auto config = detail::loaded_symbol<char* (*)()>("openblas_get_config");
  const auto threads = detail::loaded_symbol<int (*)()>("openblas_get_num_threads");
  if (config && (blas.empty() || is_openblas(blas))) {
    out.emplace_back("openblas", config());
    out.emplace_back("openblas_kernels", openblas_core());
    if (threads) out.emplace_back("openblas_threads", std::to_string(threads()));
  }
  out.emplace_back("aten_kernels", aten_kernels());
  out.emplace_back("aten_threads", std::to_string(at::get_num_threads()));
  out.emplace_back("onednn", environment("ONEDNN_MAX_CPU_ISA"));
  out.emplace_back("mkl", environment("MKL_CBWR"));
  return out;
}

}  // namespace tandem
