# cmake -DTANDEM=path -P plan_nothing_fits.cmake
# tandem plan under a budget that no configuration of the volume fits ends with status 3 and
# names the largest volume that fits the budget with its fastest layout: that layout trains at
# that volume within the budget.
include(${CMAKE_CURRENT_LIST_DIR}/run_ok.cmake)
set(model --model unet3d --levels 2 --filters 4 --data spheres --batch 2 --devices 2
          --train-samples 4 --test-samples 2)
set(budget 3145728)  # 3 MiB
execute_process(COMMAND ${TANDEM} plan ${model} --volume 32 --repeats 1 --device-memory 3MiB
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 200)
if(NOT rc STREQUAL "3")
  message(FATAL_ERROR "plan at volume 32 under 3 MiB: expected status 3, got ${rc}\n${out}\n${err}")
endif()
if(NOT err MATCHES "give --device-memory [0-9.]+MiB or more, or more devices; the largest volume that fits --device-memory 3.0 MiB on these devices is --volume ([0-9]+) \\(the fastest layout there: ([^)]*)\\)")
  message(FATAL_ERROR "status 3 names no volume that fits:\n${err}")
endif()
set(volume ${CMAKE_MATCH_1})
separate_arguments(layout UNIX_COMMAND "${CMAKE_MATCH_2}")
if(NOT volume LESS 32)
  message(FATAL_ERROR "volume ${volume} named as fitting where 32 does not")
endif()
run_ok("${TANDEM};train;${model};--volume;${volume};--device-memory;3MiB;${layout};--steps;1;--progress;none")
peaks_within("${out}" ${budget})
message(STATUS "volume ${volume} with ${layout} trains (${peaks})")
