# The MPI transport's tests: one GoogleTest binary run under mpirun with 2 and 4 ranks. It links
# tandem_mpi only (not the umbrella target), so it builds whatever state the other parts are in.
set(tandem_mpi_test_srcs
  ${CMAKE_CURRENT_LIST_DIR}/mpi_test_main.cc
  ${CMAKE_CURRENT_LIST_DIR}/wire_mailbox_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/transport_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/wait_chain_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/cuda_path_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/collectives_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/buffer_pool_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/wakeups_test.cc)
if(NOT TARGET test_mpi_transport)
  add_executable(test_mpi_transport ${tandem_mpi_test_srcs})
  target_link_libraries(test_mpi_transport PRIVATE tandem_mpi GTest::gtest Threads::Threads)
  target_precompile_headers(test_mpi_transport PRIVATE <torch/torch.h> <gtest/gtest.h>)
  tandem_warnings(test_mpi_transport)
endif()
foreach(ranks 2 4)
  add_test(NAME test_mpi_transport_n${ranks}${TANDEM_MPI_SUFFIX}
    COMMAND ${TANDEM_MPIRUN} -n ${ranks} $<TARGET_FILE:test_mpi_transport>
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_mpi_transport_n${ranks}${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 180
                       LABELS "${TANDEM_MPI_LABELS}")
endforeach()
