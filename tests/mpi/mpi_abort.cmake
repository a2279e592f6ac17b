# The abort test. Included by tests/mpi/CMakeLists.txt it builds test_mpi_abort and registers
# the check; run with `cmake -P` (as the registered test does) it is the check: the job must
# end with a non-zero status within 90 s (the waiting ranks' timeout is 600 s), print rank 1's
# prefixed reason, and never reach the end of main.
if(CMAKE_SCRIPT_MODE_FILE)
  string(REPLACE "|" ";" mpirun "${MPIRUN}")
  string(TIMESTAMP started "%s")
  execute_process(COMMAND ${mpirun} -n ${RANKS} ${PROGRAM}
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 90)
  string(TIMESTAMP ended "%s")
  math(EXPR seconds "${ended} - ${started}")
  message("${out}${err}")
  message("mpirun status: ${status} after ${seconds} s")
  if(NOT status MATCHES "^[0-9]+$")
    message(FATAL_ERROR "the aborted job did not end by itself: ${status}")
  endif()
  if(status EQUAL 0)
    message(FATAL_ERROR "the aborted job exited with status 0")
  endif()
  string(FIND "${out}${err}" "[r1/${RANKS}] deliberate abort from the abort test" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the reason with rank 1's prefix is missing from the output")
  endif()
  string(FIND "${out}${err}" "not reached" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "a rank returned from recv after the abort")
  endif()
else()
  if(NOT TARGET test_mpi_abort)
    add_executable(test_mpi_abort ${CMAKE_CURRENT_LIST_DIR}/abort_main.cc)
    target_link_libraries(test_mpi_abort PRIVATE tandem_mpi)
    tandem_warnings(test_mpi_abort)
  endif()
  string(REPLACE ";" "|" tandem_mpirun_joined "${TANDEM_MPIRUN}")
  foreach(ranks 2 4)
    add_test(NAME test_mpi_abort_n${ranks}${TANDEM_MPI_SUFFIX}
      COMMAND ${CMAKE_COMMAND} -DMPIRUN=${tandem_mpirun_joined} -DRANKS=${ranks}
              -DPROGRAM=$<TARGET_FILE:test_mpi_abort> -P ${CMAKE_CURRENT_LIST_FILE}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(test_mpi_abort_n${ranks}${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 120
                         LABELS "${TANDEM_MPI_LABELS}")
  endforeach()
endif()
