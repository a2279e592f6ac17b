# The planner under mpirun (tests/cli/mpi_plan.cmake): `tandem plan` and `train --auto` on 2
# ranks, and with 2 replicas on 4.
add_test(NAME test_mpi_plan${TANDEM_MPI_SUFFIX}
  COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${TANDEM_MPIRUN}" -DTANDEM=$<TARGET_FILE:tandem_cli>
          -DDIR=${PROJECT_BINARY_DIR}/test_mpi_plan${TANDEM_MPI_SUFFIX}
          -P ${PROJECT_SOURCE_DIR}/tests/cli/mpi_plan.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_mpi_plan${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 300
                     LABELS "${TANDEM_MPI_LABELS}")
