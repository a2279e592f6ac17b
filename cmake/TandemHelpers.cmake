# tandem_part(NAME [TORCH] [DEPS a b ...]): one library per folder src/NAME, sources globbed.
function(tandem_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
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
    tandem_warnings(${target})
    if(P_TORCH)
      target_precompile_headers(${target} PRIVATE <torch/torch.h>)
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

# tandem_test(NAME DEPS ...): one GoogleTest binary per folder tests/NAME.
function(tandem_test name)
  cmake_parse_arguments(P "TORCH" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cc)
  if(NOT srcs)
    return()
  endif()
  set(target test_${name})
  add_executable(${target} ${srcs})
  target_link_libraries(${target} PRIVATE ${P_DEPS} GTest::gtest GTest::gtest_main Threads::Threads)
  if(P_TORCH)
    target_precompile_headers(${target} PRIVATE <torch/torch.h> <gtest/gtest.h>)
  endif()
  tandem_warnings(${target})
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 300
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endfunction()
