// A function of a library this process already loaded (OpenBLAS through LibTorch), by name:
// the library that LibTorch's kernels call is the one asked or set. Null when no loaded library
// has it.
#pragma once

#include <dlfcn.h>

namespace tandem::detail {

template <typename Fn>
Fn loaded_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace tandem::detail
