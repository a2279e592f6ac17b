# Evaluations in a row over TCP, the path between hosts: OpenMPI forced onto its TCP transport
# on the loopback interface (shared memory would hide the order in which messages complete).
add_executable(test_mpi_evaluation ${CMAKE_CURRENT_LIST_DIR}/mpi_test_main.cc
               ${CMAKE_CURRENT_LIST_DIR}/evaluation_test.cc)
target_link_libraries(test_mpi_evaluation PRIVATE tandem GTest::gtest Threads::Threads)
tandem_torch_pch(test_mpi_evaluation)
tandem_warnings(test_mpi_evaluation)
foreach(ranks 2 3)
  add_test(NAME test_mpi_evaluation_tcp_n${ranks}
    COMMAND ${TANDEM_MPIRUN} --mca btl tcp,self --mca btl_tcp_if_include lo -n ${ranks}
            $<TARGET_FILE:test_mpi_evaluation>
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_mpi_evaluation_tcp_n${ranks} PROPERTIES TIMEOUT 300 LABELS mpi)
endforeach()
