# Evaluations in a row over TCP, the path between hosts: registered on the TCP pass only
# (shared memory would hide the order in which messages complete).
if(TANDEM_MPI_SUFFIX STREQUAL "_tcp")
  foreach(ranks 2 3)
    tandem_mpi_test(test_mpi_evaluation ${ranks} ${CMAKE_CURRENT_LIST_DIR}/mpi_test_main.cc
                    ${CMAKE_CURRENT_LIST_DIR}/evaluation_test.cc)
  endforeach()
endif()
