# tandem verify under mpirun: 2 stages x 2 replicas on 4 ranks against one device on the whole
# batch (the reference runs on rank 0, the ranks' gradients are gathered there); and a zeroed
# gradient message of the split caught the same way.
set(mpi_verify_common verify --model mlp --width 32 --blocks 2 --batch 16 --microbatches 4
    --devices 2 --replicas 2 --comm-timeout 60)
add_test(NAME test_mpi_cli_verify${TANDEM_MPI_SUFFIX}
  COMMAND ${CMAKE_COMMAND}
    "-DCMD=${TANDEM_MPIRUN};-n;4;$<TARGET_FILE:tandem_cli>;${mpi_verify_common}" -DSTATUS=0
    "-DMATCH=result: verified parameters=12 steps=1"
    -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
add_test(NAME test_mpi_cli_verify_fault${TANDEM_MPI_SUFFIX}
  COMMAND ${CMAKE_COMMAND}
    "-DCMD=${TANDEM_MPIRUN};-n;4;$<TARGET_FILE:tandem_cli>;${mpi_verify_common};--inject-fault;zero:grad=1,mb=1"
    -DSTATUS=1 "-DMATCH=result: differs first=dense0.weight layer=dense0 stage=0 "
    -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_mpi_cli_verify${TANDEM_MPI_SUFFIX}
                     test_mpi_cli_verify_fault${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 180
                     LABELS "${TANDEM_MPI_LABELS}")

# --log-placement under mpirun: rank 0 prints one table with every rank's records.
add_test(NAME test_mpi_cli_log_placement${TANDEM_MPI_SUFFIX}
  COMMAND ${CMAKE_COMMAND}
    "-DCMD=${TANDEM_MPIRUN};-n;2;$<TARGET_FILE:tandem_cli>;train;--model;mlp;--width;32;--blocks;2;--batch;32;--microbatches;4;--steps;2;--progress;none;--log-placement;--comm-timeout;60"
    -DSTATUS=0
    "-DMATCH=\\[r0/2\\] placement log \\(from execution\\):.*dense0 +0 +r0 cpu:0 +r0 cpu:0.*logits +1 +r1 cpu:1 +r1 cpu:1"
    -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_mpi_cli_log_placement${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 180
                     LABELS "${TANDEM_MPI_LABELS}")
