# A spatial split across ranks: one binary, its cases for 2 and for 4 ranks (each case skips
# on the other rank count).
foreach(ranks 2 4)
  tandem_mpi_test(test_mpi_spatial ${ranks} ${CMAKE_CURRENT_LIST_DIR}/mpi_test_main.cc
                  ${CMAKE_CURRENT_LIST_DIR}/spatial_test.cc)
  set_tests_properties(test_mpi_spatial_n${ranks}${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 300)
endforeach()
