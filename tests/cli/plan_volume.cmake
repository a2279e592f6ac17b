# cmake -DTANDEM=path -P plan_volume.cmake
# tandem plan --volume max names a volume and a configuration: that configuration trains at that
# volume within the budget, and the leanest configuration of the next volume of the grid does
# not (status 3).
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)
set(model --model unet3d --levels 2 --filters 4 --data spheres --batch 2 --devices 2
          --train-samples 4 --test-samples 2)
set(budget 8388608)  # 8 MiB
run_ok("${TANDEM};plan;${model};--repeats;1;--device-memory;8MiB;--volume;max")
if(NOT out MATCHES "largest volume: ([0-9]+) .*at volume ([0-9]+) the leanest configuration \\(([^)]*)\\) plans")
  message(FATAL_ERROR "'${shown}' names no volume and no limit:\n${out}")
endif()
set(largest ${CMAKE_MATCH_1})
set(next ${CMAKE_MATCH_2})
separate_arguments(leanest UNIX_COMMAND "${CMAKE_MATCH_3}")
if(NOT out MATCHES "chosen: tandem train ([^\n]*)")
  message(FATAL_ERROR "'${shown}' chose nothing:\n${out}")
endif()
separate_arguments(chosen UNIX_COMMAND "${CMAKE_MATCH_1}")
if(NOT chosen MATCHES "--volume;${largest}")
  message(FATAL_ERROR "the chosen command does not train volume ${largest}: ${chosen}")
endif()
run_ok("${TANDEM};train;${chosen};--steps;1;--progress;none")
peaks_within("${out}" ${budget})
execute_process(COMMAND ${TANDEM} train ${model} --volume ${next} --device-memory 8MiB ${leanest}
                        --steps 1 --progress none
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 150)
if(NOT rc STREQUAL "3")
  message(FATAL_ERROR "volume ${next} with ${leanest}: expected status 3, got ${rc}\n${out}\n${err}")
endif()
message(STATUS "largest volume ${largest} trains (${peaks}); ${next} does not")
