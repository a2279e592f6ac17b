# Dynamic loss scaling under MPI: an overflow on one rank skips the step on every rank
# (tests/mpi/loss_scale_main.cc), with 2 stages and with 2 stages x 2 replicas.
if(NOT TARGET test_mpi_loss_scale)
  add_executable(test_mpi_loss_scale ${CMAKE_CURRENT_LIST_DIR}/loss_scale_main.cc)
  target_link_libraries(test_mpi_loss_scale PRIVATE tandem)
  tandem_torch_pch(test_mpi_loss_scale)
  tandem_warnings(test_mpi_loss_scale)
endif()
foreach(ranks 2 4)
  add_test(NAME test_mpi_loss_scale_n${ranks}${TANDEM_MPI_SUFFIX}
    COMMAND ${TANDEM_MPIRUN} -n ${ranks} $<TARGET_FILE:test_mpi_loss_scale>
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_mpi_loss_scale_n${ranks}${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 180
                       LABELS "${TANDEM_MPI_LABELS}" PASS_REGULAR_EXPRESSION "loss_scale_main: ok")
endforeach()
