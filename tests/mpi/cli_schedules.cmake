# Schedules with several stages per rank through the command line: interleaved and zb-v on 2
# ranks train to the same weights, byte for byte, and the same held-out accuracy as the same
# run in one process (each rank computes what the in-process device of its index computes, in
# the same order; one BLAS thread per device on both sides, so the kernels' thread count
# cannot tell them apart).
set(mpi_sched_common train --model mlp --width 32 --blocks 2 --batch 32 --microbatches 4
    --steps 6 --eval-batch 2000 --seed 5 --progress none --comm-timeout 60
    --threads-per-device 1 --idle-cores keep)
foreach(schedule interleaved zb-v)
  set(chunks "")
  if(schedule STREQUAL "interleaved")
    set(chunks ";--virtual-stages;2")
  endif()
  set(dir ${PROJECT_BINARY_DIR}/mpi_cli_schedule_${schedule}${TANDEM_MPI_SUFFIX})
  add_test(NAME test_mpi_cli_schedule_${schedule}${TANDEM_MPI_SUFFIX}
    COMMAND ${CMAKE_COMMAND} -DKEY=test_accuracy
      "-DCMD0=${CMAKE_COMMAND};-E;rm;-rf;${dir}"
      "-DCMD1=${TANDEM_MPIRUN};-n;2;$<TARGET_FILE:tandem_cli>;${mpi_sched_common};--schedule;${schedule}${chunks};--save-dir;${dir}/mpi"
      "-DCMD2=$<TARGET_FILE:tandem_cli>;${mpi_sched_common};--schedule;${schedule}${chunks};--devices;2;--save-dir;${dir}/inprocess"
      "-DCMD3=$<TARGET_FILE:tandem_cli>;consolidate;${dir}/mpi;-o;${dir}/mpi.pt"
      "-DCMD4=$<TARGET_FILE:tandem_cli>;consolidate;${dir}/inprocess;-o;${dir}/inprocess.pt"
      "-DSAME=${dir}/mpi.pt;${dir}/inprocess.pt"
      -P ${PROJECT_SOURCE_DIR}/tests/cli/same_weights.cmake
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_mpi_cli_schedule_${schedule}${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 300
                       LABELS "${TANDEM_MPI_LABELS}")
endforeach()

# --partition memory under MPI: rank 0 measures and every rank plans from its numbers, so the
# ranks choose the partition (and print the plan) the same process would.
set(mpi_memory_common train --model mlp --width 64 --blocks 3 --batch 32 --microbatches 4
    --steps 4 --eval-batch 2000 --seed 5 --progress none --comm-timeout 60 --partition memory)
add_test(NAME test_mpi_cli_memory_partition${TANDEM_MPI_SUFFIX}
  COMMAND ${CMAKE_COMMAND}
    "-DCMD0=${TANDEM_MPIRUN};-n;3;$<TARGET_FILE:tandem_cli>;${mpi_memory_common}"
    "-DCMD1=$<TARGET_FILE:tandem_cli>;${mpi_memory_common};--devices;3"
    -P ${PROJECT_SOURCE_DIR}/tests/cli/same_plan.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_mpi_cli_memory_partition${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 300
                     LABELS "${TANDEM_MPI_LABELS}")
