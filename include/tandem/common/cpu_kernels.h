// The same bits on any x86-64 machine: every CPU product and reduction computed by the kernels
// of one family, AVX2's, whatever the processor offers.
//
// OpenBLAS picks its kernels when it loads (before main), from OPENBLAS_CORETYPE or the
// processor; ATen picks its own at its first operation, from ATEN_CPU_CAPABILITY or the
// processor. The families round differently (OpenBLAS's SkylakeX and Cooperlake products
// against Haswell's, ATen's AVX-512 reductions against AVX2's), so the same training gives other
// bits on an AVX-512 machine than on an AVX2 one. Every x86-64 processor with AVX2 and FMA
// (Intel since 2013, AMD since 2015) runs the AVX2 family.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tandem {

// What use_portable_cpu_kernels found and did.
struct CpuKernels {
  bool portable = false;  // both libraries now use the AVX2 family
  std::string blas_core;  // OpenBLAS's kernels ("Haswell"), empty without OpenBLAS
  std::string why_not;    // when !portable: why, in a sentence
};

// Call first thing in main, before any tensor operation. Sets ATEN_CPU_CAPABILITY=avx2 (and
// MKL_CBWR=AVX2, for a LibTorch with MKL, and ONEDNN_MAX_CPU_ISA=AVX2 for the oneDNN
// convolutions) for the libraries to read later. When OpenBLAS loaded
// other kernels than Haswell's, sets OPENBLAS_CORETYPE=Haswell and starts this program again in
// this process (exec of /proc/self/exe with the arguments it was started with, so the pid and
// open files stay): the call then returns only in the new start. When LibTorch's BLAS is another
// library than OpenBLAS (Debian lets BLIS, ATLAS or the reference BLAS be libblas.so.3), starts
// again the same way with Debian's OpenBLAS first on LD_LIBRARY_PATH, or says in why_not that
// none is installed. Overrides these variables when the
// environment set them to another family. Without AVX2 and FMA it changes nothing and says so in
// why_not.
CpuKernels use_portable_cpu_kernels();

// What this process's CPU arithmetic depends on, as (name, value) pairs in a fixed order: the
// build of tandem itself (its version and commit, build_info.h), the processor and its vector
// extensions, LibTorch's version, the library whose sgemm_ LibTorch
// calls and, for OpenBLAS, its build, kernels and threads, ATen's kernels and threads, and the
// caps set for oneDNN and MKL. Two machines that list other values may round otherwise.
std::vector<std::pair<std::string, std::string>> cpu_numerics();

}  // namespace tandem
