# Checkpoints under mpirun, through the command line (the checks are cmake -P scripts in
# tests/cli): bitwise resume of an interrupted 2-rank run, under MPI and in one process on
# another partition; and `tandem eval` of a 2-rank checkpoint on 3 ranks, in process, and on 2
# replicas that score one of the two evaluation steps each gives
# the training run's own held-out accuracy.
# Bitwise claims: over shared memory under each OpenBLAS kernel family (tests/CMakeLists.txt,
# with --cpu-kernels native so that the family is the one run); over TCP, where the claim under
# test is the transport's, under one.
if(TANDEM_MPI_SUFFIX STREQUAL "")
  set(kernels ${TANDEM_BLAS_KERNELS})
else()
  set(kernels Haswell)
endif()
foreach(kernel ${kernels})
  set(name test_mpi_checkpoint_resume_${kernel}${TANDEM_MPI_SUFFIX})
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} "-DMPIRUN=${TANDEM_MPIRUN}" -DTANDEM=$<TARGET_FILE:tandem_cli>
            -DDIR=${PROJECT_BINARY_DIR}/${name}
            -P ${PROJECT_SOURCE_DIR}/tests/cli/mpi_resume.cmake
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES TIMEOUT 600
                       LABELS "${TANDEM_MPI_LABELS};blas" ENVIRONMENT "OPENBLAS_CORETYPE=${kernel};TANDEM_CPU_KERNELS=native")
endforeach()

# An in-process run and an MPI run of the same devices with the default threads (1 each)
# train the same weights, byte for byte.
set(mpi_same_common train --batch 32 --microbatches 4 --eval-batch 5000 --progress none --seed 3
                    --steps 3 --comm-timeout 60)
foreach(kernel ${kernels})
  set(name test_mpi_same_weights_as_in_process_${kernel}${TANDEM_MPI_SUFFIX})
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli> -DDIR=${PROJECT_BINARY_DIR}/${name}
      "-DCMD0=${TANDEM_MPIRUN};-n;2;$<TARGET_FILE:tandem_cli>;${mpi_same_common}"
      "-DCMD1=$<TARGET_FILE:tandem_cli>;${mpi_same_common};--devices;2"
      -P ${PROJECT_SOURCE_DIR}/tests/cli/same_state.cmake
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 LABELS "${TANDEM_MPI_LABELS};blas"
                       ENVIRONMENT "OPENBLAS_CORETYPE=${kernel};TANDEM_CPU_KERNELS=native")
endforeach()

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
