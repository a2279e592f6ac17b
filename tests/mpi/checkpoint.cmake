# Checkpoints under mpirun, through the command line (the checks are cmake -P scripts in
# tests/cli): bitwise resume of an interrupted 2-rank run, under MPI and in one process on
# another partition; and `tandem eval` of a 2-rank checkpoint on 3 ranks, in process, and on 2
# replicas that score one of the two evaluation steps each gives
# the training run's own held-out accuracy.
add_test(NAME test_mpi_checkpoint_resume${TANDEM_MPI_SUFFIX}
  COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${TANDEM_MPIRUN}" -DTANDEM=$<TARGET_FILE:tandem_cli>
          -DDIR=${PROJECT_BINARY_DIR}/mpi_ckpt_resume${TANDEM_MPI_SUFFIX}
          -P ${PROJECT_SOURCE_DIR}/tests/cli/mpi_resume.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_mpi_checkpoint_resume${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 600
                     LABELS "${TANDEM_MPI_LABELS}")

set(mpi_eval_dir ${PROJECT_BINARY_DIR}/mpi_ckpt_eval${TANDEM_MPI_SUFFIX})
set(mpi_eval_common --batch 32 --microbatches 4 --eval-batch 5000 --seed 3 --comm-timeout 60)
add_test(NAME test_mpi_checkpoint_eval${TANDEM_MPI_SUFFIX}
  COMMAND ${CMAKE_COMMAND} -DKEY=test_accuracy
    "-DCMD0=${CMAKE_COMMAND};-E;rm;-rf;${mpi_eval_dir}"
    "-DCMD1=${TANDEM_MPIRUN};-n;2;$<TARGET_FILE:tandem_cli>;train;${mpi_eval_common};--steps;4;--progress;none;--save-dir;${mpi_eval_dir}"
    "-DCMD2=${TANDEM_MPIRUN};-n;3;$<TARGET_FILE:tandem_cli>;eval;--checkpoint;${mpi_eval_dir};${mpi_eval_common};--schedule;gpipe"
    "-DCMD3=${TANDEM_MPIRUN};-n;2;$<TARGET_FILE:tandem_cli>;eval;--checkpoint;${mpi_eval_dir};${mpi_eval_common};--balance;1,7"
    "-DCMD4=$<TARGET_FILE:tandem_cli>;eval;--checkpoint;${mpi_eval_dir};${mpi_eval_common};--devices;1"
    "-DCMD5=${TANDEM_MPIRUN};-n;4;$<TARGET_FILE:tandem_cli>;eval;--checkpoint;${mpi_eval_dir};${mpi_eval_common};--replicas;2"
    -P ${PROJECT_SOURCE_DIR}/tests/cli/same_metric.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_mpi_checkpoint_eval${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 600
                     LABELS "${TANDEM_MPI_LABELS}")
