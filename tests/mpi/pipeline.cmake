# Pipelines across ranks: equivalence with the in-process run and with one device, dropout
# masks included.
if(NOT TARGET test_mpi_pipeline)
  add_executable(test_mpi_pipeline ${CMAKE_CURRENT_LIST_DIR}/mpi_test_main.cc
                 ${CMAKE_CURRENT_LIST_DIR}/pipeline_test.cc ${CMAKE_CURRENT_LIST_DIR}/dropout_test.cc)
  target_link_libraries(test_mpi_pipeline PRIVATE tandem GTest::gtest Threads::Threads)
  tandem_torch_pch(test_mpi_pipeline)
  tandem_warnings(test_mpi_pipeline)
endif()
foreach(ranks 2 4)
  add_test(NAME test_mpi_pipeline_n${ranks}${TANDEM_MPI_SUFFIX}
    COMMAND ${TANDEM_MPIRUN} -n ${ranks} $<TARGET_FILE:test_mpi_pipeline>
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_mpi_pipeline_n${ranks}${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 300
                       LABELS "${TANDEM_MPI_LABELS}")
endforeach()

# Under MPI rank 0 writes one trace with every rank's events, on one clock (rank 1 runs with
# its clock 1000 s ahead where the test may make a time namespace).
tandem_python_test(test_mpi_merged_trace${TANDEM_MPI_SUFFIX} merged_trace_check.py
                   ${PROJECT_BINARY_DIR}/mpi_merged_trace${TANDEM_MPI_SUFFIX}.json
                   $<TARGET_FILE:tandem_cli> ${TANDEM_MPIRUN})
set_tests_properties(test_mpi_merged_trace${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 180
                     LABELS "${TANDEM_MPI_LABELS}")
# Two replicas send the same messages: in the merged trace each keeps flow ids of its own.
tandem_python_test(test_mpi_merged_trace_replicas${TANDEM_MPI_SUFFIX} merged_trace_check.py
                   ${PROJECT_BINARY_DIR}/mpi_merged_trace_replicas${TANDEM_MPI_SUFFIX}.json
                   $<TARGET_FILE:tandem_cli> --replicas 2 ${TANDEM_MPIRUN})
set_tests_properties(test_mpi_merged_trace_replicas${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 180
                     LABELS "${TANDEM_MPI_LABELS}")

# Under MPI the report and the result line count every rank's memory, and the report every
# rank's timings, not only the loss owner's; with --trace as well (rank 0 writes the trace, the
# loss owner the report).
add_test(NAME test_mpi_report_json${TANDEM_MPI_SUFFIX}
  COMMAND ${CMAKE_COMMAND}
          "-DCMD=${TANDEM_MPIRUN};-n;2;$<TARGET_FILE:tandem_cli>;train;--steps;4;--batch;32;--microbatches;4;--eval-batch;5000;--progress;none;--trace-steps;2;--comm-timeout;60;--report;${PROJECT_BINARY_DIR}/mpi_report${TANDEM_MPI_SUFFIX}.json;--trace;${PROJECT_BINARY_DIR}/mpi_report_trace${TANDEM_MPI_SUFFIX}.json"
          -DREPORT=${PROJECT_BINARY_DIR}/mpi_report${TANDEM_MPI_SUFFIX}.json -DDEVICES=2 -DMPI=1
          -P ${PROJECT_SOURCE_DIR}/tests/cli/report_json.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_mpi_report_json${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 180
                     LABELS "${TANDEM_MPI_LABELS}")

# With replicas the printed loss is the whole batch's: 2 replicas of 16 samples print the loss
# of one replica of the same 32 (the same micro-batches of 8), not replica 0's half.
set(mpi_replica_loss train --model mlp --width 32 --blocks 2 --eval-batch 5000 --steps 1
    --progress none --seed 4 --comm-timeout 60 --devices 2)
add_test(NAME test_mpi_replicas_print_the_batch_loss${TANDEM_MPI_SUFFIX}
  COMMAND ${CMAKE_COMMAND} -DKEY=loss
    "-DCMD0=${TANDEM_MPIRUN};-n;4;$<TARGET_FILE:tandem_cli>;${mpi_replica_loss};--replicas;2;--batch;16;--microbatches;2"
    "-DCMD1=$<TARGET_FILE:tandem_cli>;${mpi_replica_loss};--batch;32;--microbatches;4"
    -P ${PROJECT_SOURCE_DIR}/tests/cli/same_metric.cmake
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_mpi_replicas_print_the_batch_loss${TANDEM_MPI_SUFFIX} PROPERTIES
                     TIMEOUT 180 LABELS "${TANDEM_MPI_LABELS}")

# tandem_mpi_refusal(NAME MATCH ARGS...): 2 ranks of `tandem train ARGS` end the job at once
# with status 2 and an output matching MATCH.
function(tandem_mpi_refusal name match)
  add_test(NAME test_mpi_${name}${TANDEM_MPI_SUFFIX}
    COMMAND ${CMAKE_COMMAND} "-DCMD=${TANDEM_MPIRUN};-n;2;$<TARGET_FILE:tandem_cli>;train;${ARGN}"
            -DSTATUS=2 "-DMATCH=${match}" -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_exit.cmake
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_mpi_${name}${TANDEM_MPI_SUFFIX} PROPERTIES TIMEOUT 120
                       LABELS "${TANDEM_MPI_LABELS}")
endfunction()

# A refusal while the ranks start (before they form the job) still names the rank.
tandem_mpi_refusal(refusal_names_the_rank "\\[r1/2\\] tandem: 2 ranks cannot hold 3 replicas"
  --replicas 3 --steps 1)
# An output the run cannot write is refused at start by the rank that writes it (rank 0 the
# trace), which ends the whole job at once instead of after training.
tandem_mpi_refusal(trace_folder_missing
  "\\[r0/2\\] tandem: --trace no/such/folder/run.json: the folder no/such/folder does not exist"
  --steps 1 --trace no/such/folder/run.json)
# Each rank is one device: a --devices count that the ranks do not give is refused, not
# replaced by the rank count.
tandem_mpi_refusal(devices_count_mismatch
  "--devices 3 asks for 3 devices, but 2 ranks with --replicas 1 give 2 \\(one device per rank\\): run with mpirun -n 3, or leave --devices out"
  --devices 3 --steps 1)
