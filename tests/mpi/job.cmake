# A trainer under mpirun is made on the job, which gives it the ranks, the transport and the
# checkpoints' barriers; one made in process there is refused (tests/mpi/job_main.cc).
if(NOT TARGET test_mpi_job)
  add_executable(test_mpi_job ${CMAKE_CURRENT_LIST_DIR}/job_main.cc)
  target_link_libraries(test_mpi_job PRIVATE tandem)
  tandem_torch_pch(test_mpi_job)
  tandem_warnings(test_mpi_job)
endif()
add_test(NAME test_mpi_job_n2${TANDEM_MPI_SUFFIX}
  COMMAND ${TANDEM_MPIRUN} -n 2 $<TARGET_FILE:test_mpi_job>
          ${PROJECT_BINARY_DIR}/test_mpi_job${TANDEM_MPI_SUFFIX}
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_mpi_job_n2${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 180
                     LABELS "${TANDEM_MPI_LABELS}" PASS_REGULAR_EXPRESSION "job_main: ok")
