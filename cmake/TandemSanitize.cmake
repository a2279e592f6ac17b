# Instrumented builds, each in its own build folder (never mix them with a plain build):
#   TANDEM_SANITIZE=ON  AddressSanitizer + UndefinedBehaviorSanitizer on the library, the CLI
#                       and the tests (`make check-sanitize`, scripts/check-sanitize)
#   TANDEM_FUZZ=ON      the same plus libFuzzer's coverage instrumentation, and the targets of
#                       fuzz/ linked with libFuzzer; clang only (`make fuzz`, scripts/fuzz)
# Every target made after this file is included gets the flags, the precompiled headers
# included, so all objects agree. LibTorch and MPI themselves are not instrumented: ASan still
# sees their heap (it replaces malloc) but not their out-of-bounds accesses.
option(TANDEM_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(TANDEM_FUZZ "Build the fuzz targets with libFuzzer, ASan and UBSan (clang only)" OFF)

if(TANDEM_SANITIZE OR TANDEM_FUZZ)
  # Any UB report fails the run (no recovery); frame pointers and line tables for the reports.
  set(tandem_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    list(APPEND tandem_sanitize_flags -gline-tables-only)
  else()
    list(APPEND tandem_sanitize_flags -g1)
  endif()
  if(TANDEM_FUZZ)
    if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
      message(FATAL_ERROR "TANDEM_FUZZ needs clang (libFuzzer): configure with "
        "-DCMAKE_CXX_COMPILER=clang++, or run `make fuzz`")
    endif()
    list(APPEND tandem_sanitize_flags -fsanitize=fuzzer-no-link)
  endif()
  add_compile_options(${tandem_sanitize_flags})
  add_link_options(-fsanitize=address,undefined)
  message(STATUS "tandem: instrumented with ${tandem_sanitize_flags}")
endif()
