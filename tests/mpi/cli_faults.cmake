# `tandem train` under mpirun when something goes wrong: an exception on one rank, a rank that
# stops sending, ranks started with different options (for training, or for what they write).
# tests/cli/mpi_faults.sh drives each.
foreach(case rank-exception silent-rank mismatch mismatch-report mismatch-save)
  add_test(NAME test_mpi_cli_${case}${TANDEM_MPI_SUFFIX}
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/mpi_faults.sh ${case} $<TARGET_FILE:tandem_cli>
            ${TANDEM_MPIRUN}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_mpi_cli_${case}${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 150
                       LABELS "${TANDEM_MPI_LABELS}")
endforeach()
