# Schedules with several stages per rank through the command line: interleaved and zb-v on 2
# ranks train to the same held-out accuracy as the same run in one process.
set(mpi_sched_common train --model mlp --width 32 --blocks 2 --batch 32 --microbatches 4
    --steps 6 --eval-batch 2000 --seed 5 --progress none --comm-timeout 60)
foreach(schedule interleaved zb-v)
  set(chunks "")
  if(schedule STREQUAL "interleaved")
    set(chunks ";--virtual-stages;2")
  endif()
  add_test(NAME test_mpi_cli_schedule_${schedule}${TANDEM_MPI_SUFFIX}
    COMMAND ${CMAKE_COMMAND} -DKEY=test_accuracy
      "-DCMD0=${TANDEM_MPIRUN};-n;2;$<TARGET_FILE:tandem_cli>;${mpi_sched_common};--schedule;${schedule}${chunks}"
      "-DCMD1=$<TARGET_FILE:tandem_cli>;${mpi_sched_common};--schedule;${schedule}${chunks};--devices;2"
      -P ${PROJECT_SOURCE_DIR}/tests/cli/same_metric.cmake
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
