# tandem_test() (cmake/TandemHelpers.cmake) must stop the configuration on a test folder that
# holds no sources, instead of registering nothing without a word. Configures a probe project
# whose tandem_test(empty) names a folder with a README only, and expects it to fail saying so.
# Run as: cmake -DSOURCE=<repository> -DWORK=<scratch folder> -P tests/empty_test_folder.cmake
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/probe/empty")
file(WRITE "${WORK}/probe/empty/README" "no tests yet\n")
file(WRITE "${WORK}/probe/CMakeLists.txt"
  "cmake_minimum_required(VERSION 3.18)\n"
  "project(probe NONE)\n"
  "include(${SOURCE}/cmake/TandemHelpers.cmake)\n"
  "tandem_test(empty)\n")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${WORK}/probe" -B "${WORK}/probe/build"
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(status EQUAL 0)
  message(FATAL_ERROR "a tandem_test() folder without sources configured without an error")
endif()
string(REPLACE "\n" " " text "${err}")
string(REGEX REPLACE " +" " " text "${text}")
string(FIND "${text}" "tandem_test(empty): ${WORK}/probe/empty holds no test sources (*.cc)" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the error does not name the folder and say that it holds no sources")
endif()
