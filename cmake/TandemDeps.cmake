# Third-party libraries other than LibTorch, MPI, zlib and nifticlib: fmt, nlohmann_json, CLI11
# and (with tests) GoogleTest. They come from the system's packages (find_package), or, when
# TANDEM_VENDORED_DEPS names a folder filled by scripts/gpu-deps.sh, from copies carried to a
# machine that lacks the development packages (the GPU machine):
#   fmt::fmt                         headers only, FMT_HEADER_ONLY
#   nlohmann_json::nlohmann_json     headers
#   CLI11::CLI11                     headers
#   GTest::gtest, GTest::gtest_main  built here from the googletest sources
# Either way the same target names exist afterwards, so nothing else changes.
set(TANDEM_VENDORED_DEPS "" CACHE PATH
  "Folder filled by scripts/gpu-deps.sh to use instead of the system's fmt, nlohmann_json, CLI11 and GTest (empty: the system's)")

if(NOT TANDEM_VENDORED_DEPS)
  find_package(nlohmann_json 3 REQUIRED)
  find_package(fmt REQUIRED)
  find_package(CLI11 CONFIG REQUIRED)
  if(TANDEM_BUILD_TESTS)
    find_package(GTest REQUIRED)
  endif()
  return()
endif()

get_filename_component(_tandem_deps "${TANDEM_VENDORED_DEPS}" ABSOLUTE)
foreach(_file fmt/include/fmt/format.h nlohmann_json/include/nlohmann/json.hpp
              cli11/include/CLI/CLI.hpp googletest/CMakeLists.txt)
  if(NOT EXISTS "${_tandem_deps}/${_file}")
    message(FATAL_ERROR "TANDEM_VENDORED_DEPS=${_tandem_deps} has no ${_file}; "
      "fill it with scripts/gpu-deps.sh on a machine that has the Debian packages")
  endif()
endforeach()
message(STATUS "tandem: fmt, nlohmann_json, CLI11 and GTest from ${_tandem_deps}")

# An imported header-only target. Its headers are ordinary (-I), not system (-isystem),
# include directories: -I is searched first, so these copies win over others on the path
# (LibTorch 2.x ships its own fmt in <prefix>/include, which LibTorch's targets add).
function(tandem_vendored_headers target include_dir)
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${include_dir}")
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.25)
    set_target_properties(${target} PROPERTIES SYSTEM FALSE)
  elseif(CMAKE_VERSION VERSION_GREATER_EQUAL 3.23)
    set_target_properties(${target} PROPERTIES IMPORTED_NO_SYSTEM TRUE)
  endif()
endfunction()

tandem_vendored_headers(fmt::fmt "${_tandem_deps}/fmt/include")
set_target_properties(fmt::fmt PROPERTIES INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
tandem_vendored_headers(nlohmann_json::nlohmann_json "${_tandem_deps}/nlohmann_json/include")
tandem_vendored_headers(CLI11::CLI11 "${_tandem_deps}/cli11/include")

# nifticlib: the headers and static libraries scripts/gpu-deps.sh carried (cmake/TandemNifti.cmake).
if(EXISTS "${_tandem_deps}/nifti/include/nifti/nifti2_io.h")
  set(TANDEM_NIFTI_ROOT "${_tandem_deps}/nifti" CACHE PATH "" FORCE)
endif()

# minizip: the headers and static library scripts/gpu-deps.sh carried (cmake/TandemMinizip.cmake).
if(EXISTS "${_tandem_deps}/minizip/include/minizip/unzip.h")
  set(TANDEM_MINIZIP_ROOT "${_tandem_deps}/minizip" CACHE PATH "" FORCE)
endif()

# zlib: the top level still calls find_package(ZLIB). Where the machine has the shared library
# but no development files, point FindZLIB at the carried headers and the runtime library.
if(EXISTS "${_tandem_deps}/zlib/include/zlib.h")
  find_package(ZLIB QUIET)
  if(NOT ZLIB_FOUND)
    find_library(TANDEM_LIBZ NAMES z libz.so.1)
    if(TANDEM_LIBZ)
      message(STATUS "tandem: no zlib development files; using ${_tandem_deps}/zlib/include with ${TANDEM_LIBZ}")
      set(ZLIB_INCLUDE_DIR "${_tandem_deps}/zlib/include" CACHE PATH "" FORCE)
      set(ZLIB_LIBRARY "${TANDEM_LIBZ}" CACHE FILEPATH "" FORCE)
    endif()
  endif()
endif()

if(TANDEM_BUILD_TESTS)
  set(BUILD_GMOCK OFF CACHE BOOL "googletest: build googlemock (tandem does not use it)")
  set(INSTALL_GTEST OFF CACHE BOOL "googletest: install it (not when vendored)")
  add_subdirectory("${_tandem_deps}/googletest" "${PROJECT_BINARY_DIR}/_deps/googletest"
    EXCLUDE_FROM_ALL)
  # gtest's API passes std::string: build it with the std::string ABI of the tests, which link
  # LibTorch (TORCH_CXX_FLAGS carries -D_GLIBCXX_USE_CXX11_ABI=0 or 1).
  separate_arguments(_tandem_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  foreach(_lib gtest gtest_main)
    target_compile_options(${_lib} PRIVATE ${_tandem_torch_flags})
    if(NOT TARGET GTest::${_lib})
      add_library(GTest::${_lib} ALIAS ${_lib})
    endif()
  endforeach()
endif()
