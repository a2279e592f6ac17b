# A spatial split across ranks: one binary, its cases for 2 and for 4 ranks (each case skips
# on the other rank count).
add_executable(test_mpi_spatial ${CMAKE_CURRENT_LIST_DIR}/mpi_test_main.cc
               ${CMAKE_CURRENT_LIST_DIR}/spatial_test.cc)
target_link_libraries(test_mpi_spatial PRIVATE tandem GTest::gtest Threads::Threads)
tandem_torch_pch(test_mpi_spatial)
tandem_warnings(test_mpi_spatial)
foreach(ranks 2 4)
  add_test(NAME test_mpi_spatial_n${ranks}
    COMMAND ${TANDEM_MPIRUN} -n ${ranks} $<TARGET_FILE:test_mpi_spatial>
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_mpi_spatial_n${ranks} PROPERTIES TIMEOUT 300 LABELS mpi)
endforeach()
