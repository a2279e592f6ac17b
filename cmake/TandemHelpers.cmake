# One precompiled <torch/torch.h> for every target that includes LibTorch: it is the slowest
# header to parse by far, and one build of it instead of one per target saves minutes.
# Libraries (position-independent) and executables get one each, since the flags differ.
function(tandem_torch_pch target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set(host tandem_pch_exe)
  else()
    set(host tandem_pch_lib)
  endif()
  if(NOT TARGET ${host})
    file(WRITE ${PROJECT_BINARY_DIR}/${host}.cc "// precompiled header host\n")
    if(type STREQUAL "EXECUTABLE")
      add_library(${host} OBJECT ${PROJECT_BINARY_DIR}/${host}.cc)
    else()
      add_library(${host} OBJECT ${PROJECT_BINARY_DIR}/${host}.cc)
      set_target_properties(${host} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    endif()
    target_link_libraries(${host} PRIVATE ${TORCH_LIBRARIES} fmt::fmt)
    target_compile_options(${host} PRIVATE -Wall -Wextra -Wno-unused-parameter)
    target_precompile_headers(${host} PRIVATE <torch/torch.h>)
  endif()
  target_precompile_headers(${target} REUSE_FROM ${host})
endfunction()

# tandem_part(NAME [TORCH] [DEPS a b ...]): one library per folder src/NAME, sources globbed.
function(tandem_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()

# Sources compiled in batches (TANDEM_UNITY_BUILD, CMakeLists.txt): a part's files then share
# one translation unit, so names in their anonymous namespaces must differ between files.
function(tandem_unity target)
  if(TANDEM_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON
      UNITY_BUILD_BATCH_SIZE ${TANDEM_UNITY_BATCH})
  endif()
endfunction()

function(tandem_part name)
  cmake_parse_arguments(P "TORCH" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cc)
  set(target tandem_${name})
  if(NOT srcs)
    # A part that is only headers so far.
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  else()
    add_library(${target} ${srcs})
    set(scope PUBLIC)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    # A part's internal headers stay in src/ (never installed): "common/loaded_symbol.h".
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    tandem_warnings(${target})
    tandem_unity(${target})
    if(P_TORCH)
      tandem_torch_pch(${target})
    endif()
  endif()
  add_library(tandem::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(${target} ${scope}
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} ${scope} ${P_DEPS})
  if(P_TORCH)
    target_link_libraries(${target} ${scope} ${TORCH_LIBRARIES})
  endif()
  install(TARGETS ${target} EXPORT tandemTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()

# tandem_test(NAME [TORCH] [DEPS a b ...] [SHARDS n] [TIMEOUT seconds] [ENVIRONMENT VAR=value ...]):
# one GoogleTest binary per folder tests/NAME, registered as one CTest entry, test_NAME, that
# runs all its cases: LibTorch starts once per binary instead of once per case (0.3 s each, most
# of the suite's time when every case was an entry). Cases added to the folder's files are picked
# up with no change here. SHARDS n registers test_NAME_0 .. test_NAME_<n-1> instead, each running
# every n-th case (GoogleTest's own sharding), so that a long binary does not hold back
# `ctest -j`. A failing entry's output (ctest --output-on-failure) ends with the list of its
# failed cases, and a crash comes right after the [ RUN ] line of the case that crashed; every
# entry also writes test-results/<entry>.xml, GoogleTest's JUnit-style report of each case.
# To run some cases alone: build/tests/test_NAME --gtest_filter='Suite.*'.
# A folder without test sources is a configuration error, not a part that silently has no
# tests.
function(tandem_test name)
  cmake_parse_arguments(P "TORCH" "SHARDS;TIMEOUT" "DEPS;ENVIRONMENT" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cc)
  if(NOT srcs)
    message(FATAL_ERROR "tandem_test(${name}): ${CMAKE_CURRENT_SOURCE_DIR}/${name} holds no test "
      "sources (*.cc); add them, or remove the tandem_test(${name}) call")
  endif()
  set(target test_${name})
  add_executable(${target} ${srcs})
  target_link_libraries(${target} PRIVATE ${P_DEPS} GTest::gtest GTest::gtest_main Threads::Threads)
  # Tests may reach a part's internal headers: "runtime/core_share.h".
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  if(P_TORCH)
    tandem_torch_pch(${target})
  endif()
  tandem_warnings(${target})
  if(NOT P_SHARDS)
    set(P_SHARDS 1)
  endif()
  if(NOT P_TIMEOUT)
    set(P_TIMEOUT 600)
  endif()
  math(EXPR last "${P_SHARDS} - 1")
  foreach(shard RANGE ${last})
    set(entry ${target})
    set(environment ${P_ENVIRONMENT})
    if(P_SHARDS GREATER 1)
      set(entry ${target}_${shard})
      list(APPEND environment GTEST_TOTAL_SHARDS=${P_SHARDS} GTEST_SHARD_INDEX=${shard})
    endif()
    add_test(NAME ${entry}
      COMMAND ${target} --gtest_output=xml:${PROJECT_BINARY_DIR}/test-results/${entry}.xml
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    # The unit tests of every part are the quick subset (`make test-quick`).
    set_tests_properties(${entry} PROPERTIES TIMEOUT ${P_TIMEOUT} LABELS quick)
    if(environment)
      set_tests_properties(${entry} PROPERTIES ENVIRONMENT "${environment}")
    endif()
  endforeach()
endfunction()
